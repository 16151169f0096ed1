"""Writing the event stream's outbox, inside the transaction of the change it records.

Nothing is written unless an operator turned the stream on (EVENT_STREAM): with it off the
hot paths run exactly the statements they ran before. The batch paths (the scheduler's
insert of a tick's runs, the recording of a group of outcomes) write their entries in the
same statement as the change, as a data-modifying CTE selecting from the rows the change
returned (``insert_sql``); the others call ``add`` with a few entries, one statement for
all of them. The statements are in queries.py.
"""

from __future__ import annotations

from collections import namedtuple
from datetime import UTC, datetime

from django.conf import settings

from apps.sql.modes import on_postgresql

from . import queries
from .models import OutboxEntry

EXECUTION = OutboxEntry.Kind.EXECUTION.value
MONITOR = OutboxEntry.Kind.MONITOR.value

#: One state change: the outbox columns a writer sets (queries.ENTRY_COLUMNS; ``detail`` a
#: dict of extra facts).
Entry = namedtuple("Entry", [name for name, _ in queries.ENTRY_COLUMNS])


def enabled():
    return settings.EVENT_STREAM


def utc(moment):
    """A timestamp as every event shows it: ISO 8601 in UTC, microseconds, ``Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ") if moment else None


def utc_sql(expression):
    """``utc`` in SQL (PostgreSQL), for the events the hot paths write in SQL."""
    return f"to_char({expression} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"


def add(entries):
    """Write ``entries`` (Entry) in one statement, in the caller's transaction."""
    entries = list(entries)
    if not entries or not enabled():
        return
    entries = [entry._replace(detail=_plain(entry.detail)) for entry in entries]
    if not on_postgresql():
        OutboxEntry.objects.bulk_create([OutboxEntry(**entry._asdict()) for entry in entries])
        return
    queries.insert_entries(entries)


def _plain(detail):
    return {key: utc(value) if isinstance(value, datetime) else value for key, value in (detail or {}).items()}


def execution_entry(execution, status, previous, now, *, project_id=None, attempt=None, reason="", detail=None):
    """The Entry of ``execution`` (with its job loaded, unless ``project_id`` is given)
    moving from ``previous`` to ``status`` at ``now``."""
    if project_id is None:
        project_id = execution.job.project_id
    return Entry(EXECUTION, status, previous, execution.organization_id, project_id, execution.job_id,
                 execution.id, execution.attempt if attempt is None else attempt, reason, detail or {}, now)


def monitor_entry(monitor_id, organization_id, project_id, status, previous, now, *, detail=None):
    """The Entry of a monitor moving from ``previous`` to ``status`` at ``now``."""
    return Entry(MONITOR, status, previous, organization_id, project_id, monitor_id, None, None, "", detail or {},
                 now)
