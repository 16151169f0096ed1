"""The retention purge: executions (and their attempts) older than the organization's
plan allows are deleted, in bounded batches.

Each batch is its own short transaction of at most RETENTION_BATCH_SIZE runs, picked by
the (organization, scheduled_for) index, so no lock is held for long and the workers
recording runs never wait on the purge. Before a day is purged its roll-ups (JobDayStats)
are made if they are missing, so charts and usage outlive the executions; the metered
counters (UsageMonth, UsageDay) are never purged.

With an archive bucket configured (apps.archives), each batch is first written to object
storage and only the runs whose part was confirmed there are deleted; when a write fails
the organization's purge stops for this round and its runs stay for the next.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction

from apps.accounts.models import Organization
from apps.archives.writing import archive_and_delete, archive_store
from apps.executions.models import Execution, JobDayStats
from apps.executions.purging import delete_executions
from apps.executions.usage.rollups import roll_up
from cronsvc.archives import ArchiveWriteFailed

log = logging.getLogger(__name__)


@dataclass
class RetentionReport:
    executions: int = 0
    batches: int = 0
    rolled_up_days: int = 0
    archive_failures: int = 0  # organizations whose purge stopped on a failed archive write
    longest_batch_seconds: float = 0.0
    batch_seconds: list = field(default_factory=list)  # each batch's transaction time (lock hold)
    per_organization: dict = field(default_factory=dict)


def purge_expired(*, now, batch_size=None, organizations=None):
    """Purge every organization's expired executions. Returns a RetentionReport."""
    batch_size = max(1, batch_size or settings.RETENTION_BATCH_SIZE)
    report = RetentionReport()
    store = archive_store()
    queryset = organizations if organizations is not None else Organization.objects.select_related("plan")
    for organization in queryset.order_by("id"):
        cutoff = now - timedelta(days=organization.plan.retention_days)
        deleted = purge_organization(organization, cutoff, batch_size=batch_size, report=report,
                                     store=store, now=now)
        if deleted:
            report.per_organization[str(organization.id)] = deleted
    return report


def purge_organization(organization, cutoff, *, batch_size, report, store=None, now=None):
    # A run still queued or running (a long-delayed retry) is left alone until it ends.
    expired = (Execution.objects.filter(organization=organization, scheduled_for__lt=cutoff)
               .exclude(status__in=[Execution.Status.QUEUED, Execution.Status.RUNNING]))
    oldest = expired.order_by("scheduled_for").values_list("scheduled_for", flat=True).first()
    if oldest is None:
        return 0
    report.rolled_up_days += _roll_up_missing_days(organization, oldest.date(), cutoff.date())
    deleted = 0
    while True:
        started = time.monotonic()
        try:
            count = _delete_batch(organization, expired, batch_size, store=store, now=now)
        except ArchiveWriteFailed as exc:
            log.warning("organization %s: archive write failed, its expired runs are kept for the next purge: %s",
                        organization.pk, exc)
            report.archive_failures += 1
            break
        elapsed = time.monotonic() - started
        report.longest_batch_seconds = max(report.longest_batch_seconds, elapsed)
        if not count:
            break
        report.batch_seconds.append(elapsed)
        deleted += count
        report.batches += 1
        report.executions += count
        if count < batch_size:
            break
    return deleted


def _roll_up_missing_days(organization, first, last):
    """Roll up each day in [first, last] that has no roll-up yet for the organization."""
    done = set(JobDayStats.objects.filter(organization=organization, day__gte=first, day__lte=last)
               .values_list("day", flat=True).distinct())
    made = 0
    day = first
    while day <= last:
        if day not in done and roll_up(day, organization=organization):
            made += 1
        day += timedelta(days=1)
    return made


def _delete_batch(organization, expired, batch_size, *, store, now):
    """Delete up to ``batch_size`` of the oldest expired runs and what hangs off them, in
    one transaction (a transaction per day when they are archived first); returns how many runs."""
    ids = list(expired.order_by("scheduled_for").values_list("id", flat=True)[:batch_size])
    if store is not None:
        return archive_and_delete(organization, ids, store=store, now=now)
    with transaction.atomic():
        return delete_executions(ids)
