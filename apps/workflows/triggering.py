"""Starting downstream jobs as part of recording their upstreams' outcomes.

``start_downstream`` is an outcome hook (apps.executions.hooks): it runs inside the
transaction that records a run's final outcome, so a downstream execution exists exactly
when its upstream's outcome does — a crash in between loses and doubles nothing. It
publishes the new executions after commit; one lost then (process killed, broker down) is
found by the sweeper like any queued execution whose message went missing.

Fan-in: two upstreams of one downstream job finishing at the same moment on two workers
are serialised by a transaction-scoped advisory lock on the workflow run, so the second
one sees the first one's outcome and the downstream is decided once; the unique
(job, workflow_run_id) constraint on dependency-triggered executions backs that up.

The common case stays nearly free: one indexed query per group of outcomes tells that
none of their jobs has a downstream job.
"""

import logging
from collections import defaultdict
from datetime import timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.executions import events

from apps.executions.scheduling import publishing
from apps.executions.models import Execution
from apps.executions.routing import queue_for
from apps.jobs.models import Job, JobDependency
from apps.sql.modes import on_postgresql

from . import queries
from .rules import FINAL, RUN, SKIP, WAIT, decide, reachable

log = logging.getLogger(__name__)

UPSTREAM_FAILED = "upstream_failed"
JOB_PAUSED = "job_paused"


def start_downstream(outcomes, *, now=None):
    """The outcome hook: decide the downstream jobs of every finished run in ``outcomes``."""
    finished = [o for o in outcomes if o.moved and o.status in FINAL]
    if not finished:
        return
    with_downstream = _having_downstream({o.job_id for o in finished})
    relevant = [o.execution_id for o in finished if o.job_id in with_downstream]
    if relevant:
        advance(relevant, now=now or timezone.now())


def _having_downstream(job_ids):
    """Which of ``job_ids`` have downstream jobs: one indexed statement per group, sent like
    recording's own (binary array, psycopg directly), so a worker's per-group cost stays fixed."""
    if not on_postgresql():
        return set(JobDependency.objects.filter(upstream_id__in=job_ids).values_list("upstream_id", flat=True))
    return queries.having_downstream(job_ids)


def advance(execution_ids, *, now):
    """Start (or skip) what the finished executions ``execution_ids`` make ready."""
    _start_runs(execution_ids)
    by_run = defaultdict(set)
    for run_id, job_id in Execution.objects.filter(id__in=execution_ids).values_list("workflow_run_id", "job_id"):
        by_run[run_id].add(job_id)
    to_publish = []
    for run_id in sorted(by_run):  # one lock order for every transaction: no deadlock between two
        _lock(run_id)
        to_publish += _step(run_id, by_run[run_id], now)
    if to_publish:
        grouped = publishing.group_by_queue(to_publish)
        transaction.on_commit(lambda: publish(grouped))


def publish(grouped):
    """After commit (a seam the crash test replaces)."""
    publishing.publish(grouped)


def _start_runs(execution_ids):
    """An execution that is not part of a workflow run yet starts one: its own id."""
    Execution.objects.filter(id__in=execution_ids, workflow_run_id__isnull=True).update(workflow_run_id=F("id"))


def _lock(run_id):
    if not on_postgresql():
        return  # SQLite serialises writers anyway
    queries.lock_workflow_run(run_id)


def _step(run_id, finished_jobs, now):
    """Decide the downstream jobs of ``finished_jobs`` in this run; a skip decided here is
    itself a finished job whose downstream jobs are decided in turn. Returns (id, queue)
    of the executions to publish."""
    root_job = Execution.objects.filter(id=run_id).values_list("job_id", flat=True).first()
    to_publish, frontier, taking_part = [], set(finished_jobs), None
    while frontier:
        links = list(JobDependency.objects.filter(downstream__upstream_links__upstream_id__in=frontier)
                     .distinct().values_list("downstream_id", "upstream_id", "on"))
        by_downstream = defaultdict(list)
        for downstream, upstream, on in links:
            by_downstream[downstream].append((upstream, on))
        if taking_part is None and by_downstream:
            taking_part = _reachable_from(root_job)
        frontier = set()
        for job in Job.objects.filter(id__in=by_downstream).select_related("organization__plan").order_by("id"):
            made = _decide_one(job, by_downstream[job.id], run_id, taking_part, now)
            if made is None:
                continue
            if made.status == Execution.Status.QUEUED:
                to_publish.append((made.id, made.queue))
            else:
                frontier.add(job.id)
    return to_publish


def _reachable_from(root_job):
    edges = defaultdict(list)
    project = Job.objects.filter(id=root_job).values_list("project_id", flat=True).first()
    for upstream, downstream in JobDependency.objects.filter(upstream__project_id=project) \
            .values_list("upstream_id", "downstream_id"):
        edges[upstream].append(downstream)
    return reachable(root_job, edges)


def _decide_one(job, links, run_id, taking_part, now):
    """Insert the job's execution in this run if its upstreams decide it; None otherwise."""
    if Execution.objects.filter(job=job, workflow_run_id=run_id, trigger=Execution.Trigger.DEPENDENCY).exists():
        return None  # decided already (fan-in: another upstream got here first)
    upstream = {row[1]: row for row in Execution.objects.filter(
        workflow_run_id=run_id, job_id__in=[u for u, _ in links]).values_list("id", "job_id", "status")}
    decision = decide(job.dependency_mode, links, {u: row[2] for u, row in upstream.items()}, taking_part)
    if decision == WAIT:
        return None
    sources = sorted(str(row[0]) for row in upstream.values() if row[2] in FINAL)
    if decision == RUN and not job.enabled:
        decision, reason = SKIP, JOB_PAUSED
    else:
        reason = UPSTREAM_FAILED if decision == SKIP else ""
    return _insert(job, run_id, sources, skip_reason=reason if decision == SKIP else None, now=now)


def _insert(job, run_id, sources, *, skip_reason, now):
    skipped = skip_reason is not None
    execution = Execution(
        job=job, organization_id=job.organization_id, trigger=Execution.Trigger.DEPENDENCY,
        status=Execution.Status.SKIPPED if skipped else Execution.Status.QUEUED, skip_reason=skip_reason or "",
        queue=queue_for(job.organization.plan.queue, job.region), created_at=now, scheduled_for=now,
        published_at=None if skipped else now, finished_at=now if skipped else None,
        workflow_run_id=run_id, upstream_executions=sources, job_version=job.version,
    )
    # (job, scheduled_for, trigger) is unique too: another workflow run of this job decided
    # at the very same microsecond takes the next one.
    for nudge in range(10):
        execution.scheduled_for = now + timedelta(microseconds=nudge)
        Execution.objects.bulk_create([execution], ignore_conflicts=True)
        if Execution.objects.filter(id=execution.id).exists():
            events.changed([execution], execution.status, "", now, reason=execution.skip_reason)
            log.info("workflow run %s: %s %s", run_id, job.id, "skipped" if skipped else "queued")
            return execution
        if Execution.objects.filter(job=job, workflow_run_id=run_id, trigger=Execution.Trigger.DEPENDENCY).exists():
            return None
    raise RuntimeError(f"could not insert the execution of job {job.id} in workflow run {run_id}")
