"""Daily roll-ups of runs per job (JobDayStats), computed from executions.

Charts and usage history read the roll-ups, so they survive the retention purge. A day's
rows are an idempotent upsert of (job, day): the housekeeping task recomputes today's and
yesterday's rows on every run (late runs still land in them); older days are final, and
the purge rolls up any day it is about to delete that was never rolled up.

A run belongs to the UTC day of its ``scheduled_for``. Lateness is how long after its
scheduled time the run's first attempt started.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from datetime import date, datetime, time, timedelta, timezone

from django.db import transaction

from apps.accounts.models import Organization
from apps.sql.modes import on_postgresql
from cronsvc.statuses import FAILED

from ..lateness import lateness_ms
from ..models import Attempt, Execution, JobDayStats
from . import queries

S = Execution.Status
STAT_FIELDS = ["organization", "runs", "succeeded", "failed", "skipped", "attempts",
               "duration_p50_ms", "duration_p95_ms", "duration_p99_ms",
               "lateness_p50_ms", "lateness_p95_ms", "lateness_p99_ms", "error_kinds", "updated_at"]


def day_bounds(day):
    start = datetime.combine(day, time.min, tzinfo=timezone.utc)
    return start, start + timedelta(days=1)


def roll_up(day: date, *, organization=None, now=None):
    """Compute and store the JobDayStats rows of ``day`` (all organizations, or one).
    Returns how many rows were written. Organization by organization, so each query reads
    one range of the (organization, scheduled_for) index rather than the whole table."""
    if organization is None:
        return sum(roll_up(day, organization=org, now=now) for org in Organization.objects.order_by("id"))
    now = now or datetime.now(timezone.utc)
    if on_postgresql():
        rows = _pg_stats_rows(day, organization, now)
    else:
        rows = [_stats_row(job_id, org_id, day, runs, now)
                for (job_id, org_id), runs in _runs_of(day, organization).items()]
    if not rows:
        return 0
    with transaction.atomic():
        JobDayStats.objects.bulk_create(rows, update_conflicts=True, unique_fields=["job", "day"],
                                        update_fields=STAT_FIELDS, batch_size=1000)
    return len(rows)


def _pg_stats_rows(day, organization, now):
    """The day's figures computed in the database: counts with FILTER, nearest-rank
    percentiles with percentile_disc (the same values as ``percentile``)."""
    start, end = day_bounds(day)
    figures, error_rows = queries.day_figures(organization.pk, start, end)
    errors = defaultdict(dict)
    for job_id, kind, count in error_rows:
        errors[job_id][kind] = count
    return [
        JobDayStats(job_id=job_id, organization_id=organization.pk, day=day, runs=runs, succeeded=ok, failed=bad,
                    skipped=skipped, attempts=tries, **_percentiles("duration", durations),
                    **_percentiles("lateness", lateness), error_kinds=errors.get(job_id, {}), updated_at=now)
        for job_id, runs, ok, bad, skipped, tries, durations, lateness in figures
    ]


def _percentiles(name, values):
    values = values or [None, None, None]
    return {f"{name}_p{p}_ms": None if v is None else int(v) for p, v in zip((50, 95, 99), values)}


def roll_up_recent(now):
    """Today's and yesterday's rows: the ones still changing."""
    today = now.astimezone(timezone.utc).date()
    return roll_up(today - timedelta(days=1), now=now) + roll_up(today, now=now)


def _runs_of(day, organization):
    start, end = day_bounds(day)
    query = Execution.objects.of_kept_jobs().filter(scheduled_for__gte=start, scheduled_for__lt=end)
    if organization is not None:
        query = query.filter(organization=organization)
    first_started = dict(
        Attempt.objects.filter(execution__in=query.values("id"), number=1).values_list("execution_id", "started_at")
    )
    runs = defaultdict(list)
    for row in query.values_list("id", "job_id", "organization_id", "status", "attempt", "duration_ms",
                                 "error_kind", "scheduled_for", "jitter_seconds").iterator(chunk_size=5000):
        runs[(row[1], row[2])].append((row, first_started.get(row[0])))
    return runs


def _stats_row(job_id, org_id, day, runs, now):
    statuses = Counter(row[3] for row, _ in runs)
    durations = sorted(row[5] for row, _ in runs if row[5] is not None)
    lateness = sorted(lateness_ms(started, row[7], row[8]) for row, started in runs if started)
    errors = Counter(row[6] for row, _ in runs if row[3] in FAILED and row[6])
    return JobDayStats(
        job_id=job_id, organization_id=org_id, day=day, runs=len(runs),
        succeeded=statuses[S.SUCCEEDED], failed=sum(statuses[s] for s in FAILED), skipped=statuses[S.SKIPPED],
        attempts=sum(row[4] for row, _ in runs),
        duration_p50_ms=percentile(durations, 50), duration_p95_ms=percentile(durations, 95),
        duration_p99_ms=percentile(durations, 99),
        lateness_p50_ms=percentile(lateness, 50), lateness_p95_ms=percentile(lateness, 95),
        lateness_p99_ms=percentile(lateness, 99),
        error_kinds=dict(errors), updated_at=now or datetime.now(timezone.utc),
    )


def percentile(ordered, pct):
    """Nearest-rank percentile of an ascending list (None when empty): a value that occurred."""
    if not ordered:
        return None
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]
