"""Pings older than their organization's plan retention (Plan.retention_days, as for
executions) are deleted by the housekeeping purge (apps.billing.tasks.purge_expired), in
bounded batches: each batch is its own short statement, so the ping URLs never wait on it.
A monitor's own state (last ping, duration) stays; only its ping log gets shorter."""

from django.conf import settings

from . import queries


def purge_pings(*, now, batch_size=None):
    """Delete every expired ping; returns how many."""
    batch_size = max(1, batch_size or settings.RETENTION_BATCH_SIZE)
    deleted = 0
    while True:
        count = queries.purge_expired_pings(now, batch_size)
        deleted += count
        if count < batch_size:
            return deleted
