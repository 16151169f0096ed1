"""The run a worker thread (or asyncio task) is delivering or recording, for its log lines.

Set once per run on the delivery hot path, where a plain ContextVar.set is much cheaper than
structlog's bind (bench/README.md, "Figures behind the code"). Observability's log
configuration (apps/observability/logconfig.py) adds it to every record as ``execution_id`` and
``job_id``. Imported by config/settings.py through that module, so nothing here touches Django.
"""

from contextlib import contextmanager
from contextvars import ContextVar

RUN = ContextVar("cronsvc_run", default=None)  # (execution_id, job_id) or None


def set_run(execution):
    """This thread's (or task's) log lines from now on are about ``execution``."""
    RUN.set((execution.id, execution.job_id))


def about_run(execution):
    """The log lines inside are about ``execution`` (the recording thread, one run at a time)."""
    return about_ids(execution.id, execution.job_id)


@contextmanager
def about_ids(execution_id, job_id):
    token = RUN.set((execution_id, job_id))
    try:
        yield
    finally:
        RUN.reset(token)
