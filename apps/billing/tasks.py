"""Billing's housekeeping tasks, run by celery beat (schedules made by migration 0004)."""

import logging

from celery import shared_task
from django.utils import timezone

from apps.executions.purging import purge_deleted_jobs
from apps.executions.usage import rollups

from . import retention
from .hooks import retention_purges
from .statements import generate_statements, previous_month

log = logging.getLogger(__name__)

ROLL_UP_TASK = "apps.billing.tasks.roll_up_recent"
PURGE_TASK = "apps.billing.tasks.purge_expired"
STATEMENTS_TASK = "apps.billing.tasks.make_statements"


@shared_task(name=ROLL_UP_TASK, ignore_result=True)
def roll_up_recent():
    """Recompute today's and yesterday's JobDayStats (older days are final)."""
    rows = rollups.roll_up_recent(timezone.now())
    log.info("roll-ups: %d job-day rows", rows)
    return rows


@shared_task(name=PURGE_TASK, ignore_result=True)
def purge_expired():
    """Delete executions past each organization's retention, what deleted jobs left (a purge
    task lost with its broker) and what the registered purges delete past the same retention
    (monitor pings, apps/billing/hooks.py), in bounded batches."""
    report = retention.purge_expired(now=timezone.now())
    log.info("retention purge: %d executions in %d batches (longest %.2fs), %d days rolled up first, "
             "%d organizations kept for a failed archive write",
             report.executions, report.batches, report.longest_batch_seconds, report.rolled_up_days,
             report.archive_failures)
    left = purge_deleted_jobs(now=timezone.now())
    log.info("deleted jobs' purge: %d executions in %d batches", left.executions, left.batches)
    for what, purge in retention_purges():
        log.info("retention purge: %d %s", purge(now=timezone.now()), what)
    return report.executions + left.executions


@shared_task(name=STATEMENTS_TASK, ignore_result=True)
def make_statements():
    """Last month's statements, for every organization still missing one (idempotent)."""
    now = timezone.now()
    made = generate_statements(previous_month(now), now=now)
    log.info("statements: %d made", len(made))
    return len(made)
