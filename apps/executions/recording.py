"""Writing what happened to a run: its attempt, its new state, and the job's health.

Each function is one transaction, and each guards its update with the status it expects
(``running``), so a run whose lease the sweeper already took back is not overwritten.

``record_attempts`` records a group of finished runs at once. On PostgreSQL that is one
transaction of three set-based statements whatever the group's size (the executions'
update, the attempts' insert, the jobs' health), each sending its values as binary arrays;
elsewhere (embedded SQLite) it records the runs one by one with ``record_attempt``.
"""

import logging
from dataclasses import asdict, dataclass
from datetime import datetime

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from apps.eventstream import outbox
from apps.jobs.models import Job
from cronsvc import jobhealth
from cronsvc.statuses import CANCELLED

from . import events, queries
from .hooks import Outcome, run_outcome_hooks
from .models import Attempt, Execution

log = logging.getLogger(__name__)

S = Execution.Status
# A group's transaction that loses a deadlock (two groups updating the same jobs) is
# rolled back whole and tried again.
RETRIES_ON_DEADLOCK = 3
_RETRYABLE_SQLSTATES = ("40P01", "40001")  # deadlock detected, serialization failure


@dataclass
class AttemptValues:
    """One finished attempt: the columns of its Attempt row but the execution."""

    number: int
    started_at: datetime
    finished_at: datetime
    duration_ms: int
    request_method: str
    request_url: str
    request_headers: dict
    request_body: str
    response_status: int | None
    response_headers: dict
    response_body: str
    remote_addr: str
    outcome: str
    error_kind: str
    error_message: str


@dataclass
class Result:
    """A finished attempt and what it does to its execution (``status``: the new status,
    ``queued`` for a retry waiting until ``next_attempt_at``)."""

    execution: Execution
    attempt: AttemptValues
    status: str
    next_attempt_at: datetime | None
    auto_disable_after: int


def record_attempts(results):
    """Store the finished attempts of several runs and move each run on, together.

    As ``record_attempt`` for each: every attempt is stored; a run whose lease was taken
    back meanwhile (no longer ``running``) keeps its state and does not count for its
    job's health. Returns the ids of the executions moved on."""
    if not results:
        return set()
    if connection.vendor != "postgresql":
        return {
            result.execution.id for result in results
            if record_attempt(result.execution, attempt=Attempt(execution_id=result.execution.id,
                                                                **asdict(result.attempt)),
                              status=result.status, next_attempt_at=result.next_attempt_at,
                              auto_disable_after=result.auto_disable_after)
        }
    for tries_left in range(RETRIES_ON_DEADLOCK - 1, -1, -1):
        try:
            with transaction.atomic():
                changed = _finish_many(results)
                moved = [r for r in results if r.execution.id in changed]
                _insert_attempts(moved)
                stray = _insert_attempts([r for r in results if r.execution.id not in changed], lease_lost=True)
                _update_jobs_health(moved)
                run_outcome_hooks([_outcome(r) for r in moved]
                                  + [_outcome(r, moved=False) for r in results if r.execution.id in stray])
            break
        except Exception as exc:
            if not tries_left or _sqlstate(exc) not in _RETRYABLE_SQLSTATES:
                raise
            log.info("recording %d attempts: %s; trying again", len(results), exc)
    for result in results:
        if result.execution.id not in changed and result.status != S.CANCELLED:
            log.warning("execution %s: lease lost before its attempt %d was recorded",
                        result.execution.id, result.attempt.number)
    return changed


def metered(attempt_outcome):
    """Does an attempt count as usage? Not one cut off by its run's cancel: the customer
    stopped it, and it has no verdict (neither a success nor a failure of the day)."""
    return attempt_outcome != CANCELLED


def _sqlstate(exc):
    while exc is not None:
        state = getattr(exc, "sqlstate", None)
        if state:
            return state
        exc = exc.__cause__
    return None


def _finish_many(results):
    from psycopg.types.json import Jsonb

    params = queries.FINISHED.params(
        (result.execution.id, result.status, a.number, a.duration_ms, a.response_status, Jsonb(a.response_headers),
         a.response_body, a.remote_addr, a.error_kind, a.error_message, result.next_attempt_at, a.finished_at)
        for result in results for a in [result.attempt])
    return queries.finish_executions(params, with_events=outbox.enabled())


def _outcome(result, *, moved=True):
    a = result.attempt
    execution = result.execution
    return Outcome(
        execution_id=execution.id, job_id=execution.job_id, organization_id=execution.organization_id,
        status=result.status if moved else S.RUNNING, finished_at=a.finished_at, attempt_number=a.number,
        attempt_counted=metered(a.outcome), error_kind=a.error_kind, error_message=a.error_message,
        response_status=a.response_status, duration_ms=a.duration_ms, moved=moved,
    )


def _insert_attempts(results, *, lease_lost=False):
    """One row per result; returns the ids of the executions whose row was stored. A run
    whose lease was lost may meet the attempt of the worker that took it over under the
    same number: that one stays."""
    if not results:
        return set()
    from psycopg.types.json import Jsonb

    params = queries.ATTEMPTS.params(
        (result.execution.id, a.number, a.started_at, a.finished_at, a.duration_ms, a.request_method,
         a.request_url, Jsonb(a.request_headers), a.request_body, a.response_status, Jsonb(a.response_headers),
         a.response_body, a.remote_addr, a.outcome, a.error_kind, a.error_message)
        for result in results for a in [result.attempt])
    if lease_lost:
        return queries.insert_attempts_of_lost_leases(params)
    queries.insert_attempts(params)
    return {result.execution.id for result in results}


def _update_jobs_health(results):
    """The job health of each result in turn (cronsvc.jobhealth), as one statement."""
    per_job = {}
    for result in results:
        if jobhealth.counts(result.status):
            per_job.setdefault(result.execution.job_id, []).append(result)
    if not per_job:
        return
    rows = []
    for job_id in sorted(per_job):  # the same lock order in every group: no deadlock between two
        runs = per_job[job_id]
        last, threshold = runs[-1], runs[-1].auto_disable_after
        delta = jobhealth.health_delta([result.status for result in runs], threshold)
        rows.append((job_id, last.attempt.started_at, last.status, delta.reset, delta.head, delta.tail,
                     delta.disable, threshold, jobhealth.disabled_reason(threshold)))
    queries.update_jobs_health(queries.JOB_HEALTH.params(rows))


def record_attempt(execution, *, attempt, status, next_attempt_at, auto_disable_after):
    """Store one finished attempt and move the execution on.

    ``attempt`` is an unsaved Attempt; ``status`` the execution's new status (``queued``
    for a retry waiting until ``next_attempt_at``)."""
    with transaction.atomic():
        attempt.save()
        changed = _finish(execution, status, attempt, next_attempt_at)
        if changed and status != S.QUEUED:
            _update_job_health(execution.job_id, status, attempt.started_at, auto_disable_after)
        if changed:
            events.changed([execution], status, S.RUNNING, attempt.finished_at, attempt=attempt.number,
                           reason="retry" if status == S.QUEUED else "", error_kind=attempt.error_kind or None,
                           response_status=attempt.response_status, duration_ms=attempt.duration_ms,
                           next_attempt_at=next_attempt_at)
        run_outcome_hooks([Outcome(
            execution_id=execution.id, job_id=execution.job_id, organization_id=execution.organization_id,
            status=status if changed else S.RUNNING, finished_at=attempt.finished_at,
            attempt_number=attempt.number, attempt_counted=metered(attempt.outcome), error_kind=attempt.error_kind,
            error_message=attempt.error_message, response_status=attempt.response_status,
            duration_ms=attempt.duration_ms, moved=bool(changed),
        )])
    return changed


def _finish(execution, status, attempt, next_attempt_at):
    values = dict(
        status=status, attempt=attempt.number, duration_ms=attempt.duration_ms,
        response_status=attempt.response_status, response_headers=attempt.response_headers,
        response_body=attempt.response_body, remote_addr=attempt.remote_addr,
        error_kind=attempt.error_kind, error_message=attempt.error_message,
        lease_expires_at=None, next_attempt_at=next_attempt_at,
    )
    if status == S.QUEUED:
        values["published_at"] = None  # the scheduler publishes it when next_attempt_at comes
    else:
        values["finished_at"] = attempt.finished_at
    changed = Execution.objects.filter(id=execution.id, status=S.RUNNING).update(**values)
    if not changed and status != S.CANCELLED:
        log.warning("execution %s: lease lost before its attempt %d was recorded", execution.id, attempt.number)
    return changed


def _update_job_health(job_id, status, ran_at, auto_disable_after):
    """One run's effect on its job's health, by the ORM (the same HealthDelta as the grouped statement)."""
    if not jobhealth.counts(status):
        return
    delta = jobhealth.health_delta([status], auto_disable_after)
    jobs = Job.objects.filter(id=job_id)
    jobs.update(last_run_at=ran_at, last_status=status,
                consecutive_failures=delta.tail if delta.reset else F("consecutive_failures") + delta.head)
    if not auto_disable_after or not (delta.disable or delta.head):
        return  # 0: the plan never disables jobs
    disabling = jobs.filter(enabled=True)
    if not delta.disable:  # HealthDelta.disables on the count just stored
        disabling = disabling.filter(consecutive_failures__gte=auto_disable_after)
    disabling.update(enabled=False, disabled_reason=jobhealth.disabled_reason(auto_disable_after))


def skip_running(execution, reason, now):
    """A claimed run that must not go ahead (e.g. its previous run is still going)."""
    with transaction.atomic():
        changed = Execution.objects.filter(id=execution.id, status=S.RUNNING).update(
            status=S.SKIPPED, skip_reason=reason, finished_at=now, lease_expires_at=None,
        )
        if changed:
            events.changed([execution], S.SKIPPED, S.RUNNING, now, reason=reason)
            run_outcome_hooks([Outcome(
                execution_id=execution.id, job_id=execution.job_id, organization_id=execution.organization_id,
                status=S.SKIPPED, finished_at=now, skip_reason=reason,
            )])
    return changed


def defer_running(execution, until, *, error_kind="", error_message="", now=None):
    """Hand a claimed run back to wait (concurrency cap, open circuit); not an attempt."""
    values = dict(status=S.QUEUED, next_attempt_at=until, published_at=None, lease_expires_at=None)
    if error_kind:
        values.update(error_kind=error_kind, error_message=error_message)
    running = Execution.objects.filter(id=execution.id, status=S.RUNNING)
    if not outbox.enabled():
        return running.update(**values)  # one statement, no transaction of its own
    with transaction.atomic():
        changed = running.update(**values)
        if changed:
            events.changed([execution], S.QUEUED, S.RUNNING, now or timezone.now(), reason="deferred",
                           next_attempt_at=until, error_kind=error_kind or None)
    return changed


def fail_running(execution, *, error_kind, error_message, now, auto_disable_after):
    """A run that cannot even be sent (e.g. its body template no longer renders)."""
    with transaction.atomic():
        changed = Execution.objects.filter(id=execution.id, status=S.RUNNING).update(
            status=S.FAILED, error_kind=error_kind, error_message=error_message, finished_at=now,
            lease_expires_at=None,
        )
        if changed:
            _update_job_health(execution.job_id, S.FAILED, now, auto_disable_after)
            events.changed([execution], S.FAILED, S.RUNNING, now, error_kind=error_kind)
            run_outcome_hooks([Outcome(
                execution_id=execution.id, job_id=execution.job_id, organization_id=execution.organization_id,
                status=S.FAILED, finished_at=now, error_kind=error_kind, error_message=error_message,
            )])
    return changed
