"""Python client for the cronsvc REST API, and the `cronsvc` command (cronsvc_client.cli)."""

__version__ = "0.1.0"

from .client import Client  # noqa: E402
from .errors import ApiError, ConfigError, CronsvcError, MissingApiKey, NetworkError, NotTheApi  # noqa: E402
from .models import CrontabImport, Execution, Job, JobVersion, Monitor, NextRuns, Ping, Project  # noqa: E402

__all__ = ["Client", "ApiError", "ConfigError", "CronsvcError", "MissingApiKey", "NetworkError", "NotTheApi",
           "CrontabImport", "Execution", "Job", "JobVersion", "Monitor", "NextRuns", "Ping", "Project", "__version__"]
