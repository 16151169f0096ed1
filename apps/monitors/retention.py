"""Pings older than their organization's plan retention (Plan.retention_days, as for
executions) are deleted by the housekeeping purge (apps.billing.tasks.purge_expired), in
bounded batches: each batch is its own short statement, so the ping URLs never wait on it.
A monitor's own state (last ping, duration) stays; only its ping log gets shorter."""

from django.conf import settings
from django.db import connection

from apps.accounts.models import Organization
from apps.billing.models import Plan

from .models import Monitor, Ping

P, M, O, PL = Ping._meta.db_table, Monitor._meta.db_table, Organization._meta.db_table, Plan._meta.db_table

PURGE_SQL = (
    f"DELETE FROM {P} WHERE id IN ("
    f" SELECT p.id FROM {P} p JOIN {M} m ON m.id = p.monitor_id JOIN {O} o ON o.id = m.organization_id"
    f" JOIN {PL} pl ON pl.id = o.plan_id"
    f" WHERE p.created_at < %(now)s - make_interval(days => pl.retention_days) LIMIT %(n)s)"
)


def purge_pings(*, now, batch_size=None):
    """Delete every expired ping; returns how many."""
    batch_size = max(1, batch_size or settings.RETENTION_BATCH_SIZE)
    deleted = 0
    while True:
        with connection.cursor() as cursor:
            cursor.execute(PURGE_SQL, {"now": now, "n": batch_size})
            count = cursor.rowcount
        deleted += count
        if count < batch_size:
            return deleted
