"""The notifications app's hand-written SQL: the periodic watch's marks of the runs it has
alerted about (watch.py)."""

from django.db import connection
from django.utils import timezone

from .models import RunAlert

MARK_RUN_ALERT = (f"INSERT INTO {connection.ops.quote_name(RunAlert._meta.db_table)} "
                  f"(execution_id, kind, created_at) VALUES (%s, %s, %s) "
                  f"ON CONFLICT (execution_id, kind) DO NOTHING RETURNING id")


def mark_run_alerts(keys):
    """Those (kind, execution_id) of ``keys`` not alerted about before, marked now (a
    RunAlert each), in the caller's transaction: one INSERT per key."""
    if not keys:
        return set()
    fresh = set()
    with connection.cursor() as cursor:
        for kind, execution_id in keys:
            cursor.execute(MARK_RUN_ALERT, [execution_id.hex if connection.vendor == "sqlite" else execution_id, kind,
                                            timezone.now()])
            if cursor.fetchone():
                fresh.add((kind, execution_id))
    return fresh
