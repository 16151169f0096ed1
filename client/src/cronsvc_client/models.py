"""Typed views of the API's resources.

Each model has the fields a script most often reads, typed (timestamps as aware datetimes),
and ``raw``: the whole object as the API sent it, fields added later included. The command's
JSON output prints ``raw``, so nothing is lost in translation.
"""

import dataclasses
import typing
from dataclasses import dataclass, field
from datetime import datetime


def parse_datetime(value):
    """The API's ISO 8601 instants ("...Z" or with an offset) as aware datetimes."""
    if value is None or isinstance(value, datetime):
        return value
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


class Model:
    #: Keys every object of this kind has; by default the fields without a default value.
    EXPECTED_KEYS = None

    @classmethod
    def expected_keys(cls):
        """``key -> None`` for the keys the API always sends (Client checks answers with it)."""
        keys = cls.EXPECTED_KEYS
        if keys is None:
            keys = [item.name for item in dataclasses.fields(cls)
                    if item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING]
        return dict.fromkeys(keys)

    @classmethod
    def from_api(cls, data):
        hints = typing.get_type_hints(cls)
        values = {}
        for item in dataclasses.fields(cls):
            if item.name == "raw" or item.name not in data:
                continue
            value = data[item.name]
            values[item.name] = parse_datetime(value) if datetime in typing.get_args(hints[item.name]) else value
        return cls(**values, raw=dict(data))


@dataclass
class Project(Model):
    id: str
    name: str = ""
    slug: str = ""
    timezone: str = "UTC"
    job_count: int | None = None
    created_at: datetime | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Job(Model):
    id: str
    project: str | None = None
    name: str = ""
    description: str = ""
    tags: list = field(default_factory=list)
    enabled: bool = True
    schedule: dict = field(default_factory=dict)
    start_at: datetime | None = None
    end_at: datetime | None = None
    request: dict = field(default_factory=dict)
    retry: dict = field(default_factory=dict)
    region: str = ""
    next_run_at: datetime | None = None
    last_run_at: datetime | None = None
    last_status: str | None = None
    consecutive_failures: int = 0
    paused_reason: str | None = None
    disabled_reason: str | None = None
    expired_at: datetime | None = None
    description_human: str = ""
    dependencies: list = field(default_factory=list)  # upstream jobs: [{"job", "on"}]
    dependents: list = field(default_factory=list)  # jobs that run after this one
    created_at: datetime | None = None
    updated_at: datetime | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Execution(Model):
    id: str
    job: str | None = None
    scheduled_for: datetime | None = None
    trigger: str = ""
    status: str = ""
    skip_reason: str | None = None
    job_version: int | None = None
    attempt: int = 0
    replay_of: str | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_ms: int | None = None
    response: dict | None = None
    error: dict | None = None
    workflow_run_id: str | None = None
    upstream_executions: list = field(default_factory=list)
    attempts: list | None = None  # only on `get_execution` (the detail view)
    cancelled_at: datetime | None = None
    cancelled_by: dict | None = None  # {"kind": "user"|"api_key"|"operator"|"system", "id", "name"}
    raw: dict = field(default_factory=dict, repr=False)

    # Every other status is final (succeeded, failed, cancelled, ...; and any the server adds).
    UNFINISHED_STATUSES = frozenset({"queued", "running"})

    @property
    def finished(self):
        return self.status not in self.UNFINISHED_STATUSES


@dataclass
class JobVersion(Model):
    """One version of a job's definition (``snapshot`` only from ``get_job_version`` and
    ``rollback_job``)."""

    number: int
    created_at: datetime | None = None
    source: str = ""  # api, page, admin, import, rollback, ...
    author: dict | None = None  # {"kind", "id", "name"}; None when not known
    rollback_of: int | None = None
    changes: dict = field(default_factory=dict)  # {field: {"from", "to"}}; empty for version 1
    snapshot: dict | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Monitor(Model):
    id: str
    project: str | None = None
    name: str = ""
    schedule: dict = field(default_factory=dict)
    schedule_description: str = ""
    grace_seconds: int = 0
    state: str = ""
    ping_url: str = ""
    last_ping_at: datetime | None = None
    last_ping_kind: str | None = None
    last_duration_ms: int | None = None
    next_expected_at: datetime | None = None
    deadline_at: datetime | None = None  # late until then, down after it
    state_changed_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class Ping(Model):
    id: str | int
    kind: str = ""
    exit_code: int | None = None
    rid: str = ""
    duration_ms: int | None = None
    method: str = ""
    body: str = ""
    created_at: datetime | None = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class NextRuns(Model):
    EXPECTED_KEYS = ("runs",)
    runs: list = field(default_factory=list)  # [{"at": UTC ISO, "local": in the schedule's zone}]
    description: str = ""
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class CrontabImport(Model):
    EXPECTED_KEYS = ("jobs", "errors")
    dry_run: bool = True
    jobs: list = field(default_factory=list)  # [{"line", "id" (None on a dry run), "name", ...}]
    errors: list = field(default_factory=list)  # [{"line", "text", "code", "reason"}]
    raw: dict = field(default_factory=dict, repr=False)
