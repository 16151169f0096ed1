"""One scheduler tick: claim due jobs, record their occurrences once, advance them.

Safe with any number of schedulers: on PostgreSQL the due jobs are locked with
``FOR UPDATE SKIP LOCKED`` so two schedulers never hold the same job, the Execution
rows and the new ``next_run_at`` are written in the same transaction, and the unique
(job, scheduled_for, trigger) constraint refuses a duplicate occurrence whatever happens.
Publishing happens only after the commit (see publishing.py); what is never published
is found by the sweeper.
"""

import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction

from apps.accounts.models import Organization
from apps.jobs.models import Job
from apps.jobs.scheduling import due_time, job_schedule, occurrence_of
from cronsvc.misfire import plan_catch_up
from cronsvc.schedules import next_run

from .models import Execution
from .routing import queue_for

log = logging.getLogger(__name__)

#: how many due occurrences of one job a tick enumerates before jumping ahead.
MAX_DUE_SCAN = 200
#: a stalled scheduler (SIGSTOP, GC pause, lost network) must not sit on its locks:
#: PostgreSQL aborts its transaction, the rows go to another scheduler, and the
#: stalled one's commit fails instead of acting on a stale view.
CLAIM_IDLE_TIMEOUT_MS = 10_000

CLAIM_FIELDS = [
    "id", "organization_id", "schedule_type", "cron_expression", "interval_seconds", "run_at",
    "timezone", "start_at", "end_at", "jitter_seconds", "misfire_policy", "misfire_grace_seconds",
    "overlap_policy", "region", "next_run_at", "created_at",
]


@dataclass
class TickResult:
    claimed: int = 0
    created: int = 0
    skipped: int = 0
    expired: int = 0
    to_publish: list = field(default_factory=list)  # (execution id, queue, due_at)


@dataclass
class _OrgInfo:
    suspended: bool
    queue: str


def claim_due(now, batch_size):
    """Run one claim transaction. Returns a TickResult whose ``to_publish`` lists the
    executions to publish once this function has returned (the transaction committed)."""
    with transaction.atomic():
        _limit_idle_time()
        jobs = list(
            Job.objects.filter(enabled=True, next_run_at__isnull=False, next_run_at__lte=now)
            .order_by("next_run_at")
            .only(*CLAIM_FIELDS)
            .select_for_update(skip_locked=True, of=("self",))[:batch_size]
        )
        if not jobs:
            return TickResult()
        return _process_batch(jobs, now)


def _limit_idle_time():
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"SET LOCAL idle_in_transaction_session_timeout = {CLAIM_IDLE_TIMEOUT_MS}")


def _process_batch(jobs, now):
    result = TickResult(claimed=len(jobs))
    orgs = _organizations({job.organization_id for job in jobs})
    busy = _jobs_with_unfinished_runs([j.id for j in jobs if j.overlap_policy == Job.OverlapPolicy.FORBID])
    executions_with_due, updates = [], []
    for job in jobs:
        org = orgs[job.organization_id]
        job_executions, new_next = _occurrences_for(job, now, org, job.id in busy)
        executions_with_due.extend((e, due_time(e.scheduled_for, job)) for e in job_executions)
        expired = new_next is None
        updates.append((job.id, new_next, now if expired else None))
        result.expired += expired
    # ignore_conflicts: an occurrence that already has its row (e.g. the job's jitter was
    # edited so the same occurrence came due again) is not run a second time.
    Execution.objects.bulk_create([e for e, _ in executions_with_due], batch_size=1000, ignore_conflicts=True)
    _advance_jobs(updates)
    for execution, due_at in executions_with_due:
        if execution.status == Execution.Status.QUEUED:
            result.created += 1
            result.to_publish.append((execution.id, execution.queue, due_at))
        else:
            result.skipped += 1
    return result


def _organizations(org_ids):
    rows = Organization.objects.filter(id__in=org_ids).values_list("id", "suspended", "plan__queue")
    return {org_id: _OrgInfo(suspended, queue) for org_id, suspended, queue in rows}


def _jobs_with_unfinished_runs(job_ids):
    if not job_ids:
        return set()
    unfinished = Execution.objects.filter(
        job_id__in=job_ids, status__in=[Execution.Status.QUEUED, Execution.Status.RUNNING]
    )
    return set(unfinished.values_list("job_id", flat=True).distinct())


def _occurrences_for(job, now, org, has_unfinished_run):
    """Executions to insert for one claimed job, and its next due time (None: no more)."""
    schedule = job_schedule(job)
    due = _due_occurrences(job, schedule, now)
    following = next_run(schedule, due[-1] if due else now, start_at=job.start_at, end_at=job.end_at)
    if org.suspended:
        # A suspended tenant's jobs stop firing; they resume at their next occurrence.
        return [], due_time(following, job)
    plan = plan_catch_up(
        due, now=now, policy=job.misfire_policy, grace_seconds=job.misfire_grace_seconds,
        on_time_seconds=settings.MISFIRE_ON_TIME_SECONDS,
    )
    queue = queue_for(org.queue, job.region)
    executions = [_skipped(job, at, reason, now) for at, reason in plan.skip]
    for index, at in enumerate(plan.run):
        if job.overlap_policy == Job.OverlapPolicy.FORBID and (has_unfinished_run or index > 0):
            executions.append(_skipped(job, at, "overlap", now))
        else:
            executions.append(_queued(job, at, queue, now))
    return executions, due_time(following, job)


def _due_occurrences(job, schedule, now):
    """Every occurrence due at ``now``, oldest first (bounded: see MAX_DUE_SCAN)."""
    first = occurrence_of(job.next_run_at, job)
    due = [first]
    while len(due) < MAX_DUE_SCAN:
        following = next_run(schedule, due[-1], start_at=job.start_at, end_at=job.end_at)
        if following is None or due_time(following, job) > now:
            return due
        due.append(following)
    # Down for very long: occurrences before the grace window are expired anyway, so
    # enumerate from there rather than writing thousands of skipped rows.
    log.warning("job %s: more than %d missed occurrences; older ones are not recorded", job.id, MAX_DUE_SCAN)
    grace_start = now - timedelta(seconds=job.misfire_grace_seconds)
    recent = next_run(schedule, max(grace_start, due[-1]), start_at=job.start_at, end_at=job.end_at)
    tail = []
    while recent is not None and due_time(recent, job) <= now and len(tail) < MAX_DUE_SCAN:
        tail.append(recent)
        recent = next_run(schedule, recent, start_at=job.start_at, end_at=job.end_at)
    return due[-1:] + tail if tail else due[-1:]


def _queued(job, at, queue, now):
    return Execution(
        job_id=job.id, organization_id=job.organization_id, scheduled_for=at,
        trigger=Execution.Trigger.SCHEDULE, status=Execution.Status.QUEUED, queue=queue,
        created_at=now, published_at=now,
    )


def _skipped(job, at, reason, now):
    return Execution(
        job_id=job.id, organization_id=job.organization_id, scheduled_for=at,
        trigger=Execution.Trigger.SCHEDULE, status=Execution.Status.SKIPPED, skip_reason=reason,
        created_at=now, finished_at=now,
    )


def _advance_jobs(updates):
    """Write every claimed job's next due time in one statement."""
    if connection.vendor == "postgresql":
        values = ", ".join(["(%s::uuid, %s::timestamptz, %s::timestamptz)"] * len(updates))
        params = [value for row in updates for value in row]
        sql = (
            f"UPDATE {Job._meta.db_table} AS j SET next_run_at = v.next_run_at, "
            "expired_at = COALESCE(v.expired_at, j.expired_at) "
            f"FROM (VALUES {values}) AS v(id, next_run_at, expired_at) WHERE j.id = v.id"
        )
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
        return
    # SQLite (embedded mode) runs one scheduler with small batches: a row at a time is fine.
    for job_id, next_at, expired_at in updates:
        fields = {"next_run_at": next_at}
        if expired_at is not None:
            fields["expired_at"] = expired_at
        Job.objects.filter(id=job_id).update(**fields)
