"""Writing what happened to a run: its attempt, its new state, and the job's health.

Each function is one transaction, and each write is fenced (docs/architecture.md, "Fenced
leases"): it changes the run only while the row is ``running`` and still carries the lease
token of the worker's claim (``Execution.lease_token``, loaded by the claim). A run the
sweeper took back, or another worker claimed since, is not touched: the late worker's
attempt is kept as a superseded one (history, metered) and changes nothing else.

``record_attempts`` records a group of finished runs at once. On PostgreSQL that is one
transaction of three set-based statements whatever the group's size (the executions'
update, the attempts' insert, the jobs' health), each sending its values as binary arrays;
elsewhere (embedded SQLite) it records the runs one by one with ``record_attempt``.
"""

import logging
from dataclasses import asdict, dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.eventstream import outbox
from apps.jobs.models import Job
from apps.sql.modes import on_postgresql
from apps.sql.planning import reach_rows_by_key
from cronsvc import jobhealth
from cronsvc.delivery.outcome import request_started
from cronsvc.statuses import CANCELLED

from .. import events, queries

from . import scripts
from ..hooks import RunOutcome, run_outcome_hooks
from .logcontext import about_run
from ..models import Attempt, Execution

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
class FinishedAttempt:
    """A finished attempt and what it does to its execution (``status``: the new status,
    ``queued`` for a retry waiting until ``next_attempt_at``)."""

    execution: Execution
    attempt: AttemptValues
    status: str
    next_attempt_at: datetime | None
    auto_disable_after: int


def record_attempts(results):
    """Store the finished attempts of several runs and move each run on, together.

    As ``record_attempt`` for each: every attempt is stored; a run no longer held under
    its worker's token (taken back, cancelled) keeps its state and does not count for its
    job's health. Returns the ids of the executions moved on.

    One run's failure to record never rolls back another's: when the group's transaction
    fails (other than a deadlock, which is tried again), each run is recorded in a
    transaction of its own, and one that still fails is logged and left ``running``: its
    lease ends and the sweeper takes it back."""
    if not results:
        return set()
    if not on_postgresql():
        return {
            result.execution.id for result in results
            if record_attempt(result.execution, attempt=Attempt(execution_id=result.execution.id,
                                                                **asdict(result.attempt)),
                              status=result.status, next_attempt_at=result.next_attempt_at,
                              auto_disable_after=result.auto_disable_after)
        }
    try:
        return _record_group(results)
    except Exception:
        if len(results) == 1:
            raise
        log.warning("recording %d runs together failed; recording them one by one", len(results), exc_info=True)
    changed = set()
    for result in results:
        try:
            changed |= _record_group([result])
        except Exception:  # noqa: BLE001 - this run's lease ends and the sweeper takes it back
            with about_run(result.execution):
                log.exception("execution %s: recording its attempt %d failed", result.execution.id,
                              result.attempt.number)
    return changed


def _record_group(results):
    for tries_left in range(RETRIES_ON_DEADLOCK - 1, -1, -1):
        try:
            with transaction.atomic():
                reach_rows_by_key()  # every statement below names its rows by key
                changed = _finish_many(results)
                moved = [r for r in results if r.execution.id in changed]
                _insert_attempts(moved)
                stored = _insert_unmoved_attempts([r for r in results if r.execution.id not in changed])
                _update_jobs_health(moved)
                run_outcome_hooks([_outcome(r) for r in moved]
                                  + [_outcome(r, moved=False) for r in results if r.execution.id in stored])
            break
        except Exception as exc:
            if not tries_left or queries.sqlstate(exc) not in _RETRYABLE_SQLSTATES:
                raise
            log.info("recording %d attempts: %s; trying again", len(results), exc)
    for result in results:
        if result.execution.id not in changed:
            with about_run(result.execution):
                _say_not_recorded(result, stored)
    return changed


def _say_not_recorded(result, stored):
    if stored.get(result.execution.id, 0):
        log.warning("execution %s: superseded (its lease was taken back before attempt %d was recorded): "
                    "the attempt is kept as history and changes nothing", result.execution.id,
                    result.attempt.number)
    elif result.execution.id not in stored:
        log.info("execution %s: gone before its attempt %d was recorded", result.execution.id,
                 result.attempt.number)


def metered(attempt):
    """Does an attempt count as usage (docs/billing.md)? Only one whose request (or script)
    really started (cronsvc.delivery.outcome.request_started, scripts.NOT_STARTED), and not one cut off by its
    run's cancel: the customer stopped it, and it has no verdict (neither a success nor a
    failure of the day). A superseded attempt counts: its request went out."""
    kind = attempt.error_kind or None
    return attempt.outcome != CANCELLED and request_started(kind) and kind not in scripts.NOT_STARTED


def _finish_many(results):
    from psycopg.types.json import Jsonb

    params = queries.FINISHED.params(
        (result.execution.id, result.execution.lease_token, result.status, a.number, a.duration_ms, a.response_status,
         Jsonb(a.response_headers), a.response_body, a.remote_addr, a.error_kind, a.error_message,
         _retry_in(result), a.finished_at)
        # in id order, as the heartbeat locks them: two statements never wait on each other in a cycle
        for result in sorted(results, key=_by_id) for a in [result.attempt])
    return queries.finish_executions(params, with_events=outbox.enabled())


def _by_id(result):
    return result.execution.id


def _retry_in(result):
    """A retry's delay in seconds: the database adds it to its own clock."""
    if result.next_attempt_at is None:
        return None
    return max(0.0, (result.next_attempt_at - result.attempt.finished_at).total_seconds())


def _outcome(result, *, moved=True):
    a = result.attempt
    execution = result.execution
    return RunOutcome(
        execution_id=execution.id, job_id=execution.job_id, organization_id=execution.organization_id,
        status=result.status if moved else S.RUNNING, finished_at=a.finished_at, attempt_number=a.number,
        attempt_counted=metered(a), error_kind=a.error_kind, error_message=a.error_message,
        response_status=a.response_status, duration_ms=a.duration_ms, moved=moved,
    )


def _attempt_row(result):
    from psycopg.types.json import Jsonb

    a = result.attempt
    return (result.execution.id, a.number, a.started_at, a.finished_at, a.duration_ms, a.request_method,
            a.request_url, Jsonb(a.request_headers), a.request_body, a.response_status, Jsonb(a.response_headers),
            a.response_body, a.remote_addr, a.outcome, a.error_kind, a.error_message)


def _insert_attempts(results):
    """The attempts of the runs moved on: the runs' own, one row each."""
    if results:
        queries.insert_attempts(queries.ATTEMPTS.params(_attempt_row(result) for result in results))


def _insert_unmoved_attempts(results):
    """The attempts of the runs not moved on (queries.INSERT_UNMOVED_ATTEMPTS): {execution
    id: superseded token (0: the run's own)} of those stored."""
    if not results:
        return {}
    return queries.insert_unmoved_attempts(queries.UNMOVED_ATTEMPTS.params(
        (*_attempt_row(result), result.execution.lease_token) for result in results))


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
    """Store one finished attempt and move the execution on (the ORM's way, for the
    embedded mode's SQLite; the same fencing as the grouped statements).

    ``attempt`` is an unsaved Attempt; ``status`` the execution's new status (``queued``
    for a retry waiting until ``next_attempt_at``)."""
    with transaction.atomic():
        changed = _finish(execution, status, attempt, next_attempt_at)
        if not changed:
            token = Execution.objects.filter(id=execution.id).values_list("lease_token", flat=True).first()
            if token is None:
                return 0  # the run is gone (its job deleted): nothing to keep it under
            attempt.superseded_token = 0 if token == execution.lease_token else execution.lease_token
        attempt.save()
        if changed and status != S.QUEUED:
            _update_job_health(execution.job_id, status, attempt.started_at, auto_disable_after)
        if changed:
            events.changed([execution], status, S.RUNNING, attempt.finished_at, attempt=attempt.number,
                           reason="retry" if status == S.QUEUED else "", error_kind=attempt.error_kind or None,
                           response_status=attempt.response_status, duration_ms=attempt.duration_ms,
                           next_attempt_at=next_attempt_at)
        run_outcome_hooks([RunOutcome(
            execution_id=execution.id, job_id=execution.job_id, organization_id=execution.organization_id,
            status=status if changed else S.RUNNING, finished_at=attempt.finished_at,
            attempt_number=attempt.number, attempt_counted=metered(attempt), error_kind=attempt.error_kind,
            error_message=attempt.error_message, response_status=attempt.response_status,
            duration_ms=attempt.duration_ms, moved=bool(changed),
        )])
    return changed


def held(execution):
    """The run while its worker holds it: ``running`` under the token of its claim."""
    return Execution.objects.filter(id=execution.id, status=S.RUNNING, lease_token=execution.lease_token)


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
    changed = held(execution).update(**values)
    if not changed and status != S.CANCELLED:
        with about_run(execution):
            log.warning("execution %s: superseded before its attempt %d was recorded", execution.id, attempt.number)
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
        changed = held(execution).update(
            status=S.SKIPPED, skip_reason=reason, finished_at=now, lease_expires_at=None,
        )
        if changed:
            events.changed([execution], S.SKIPPED, S.RUNNING, now, reason=reason)
            run_outcome_hooks([RunOutcome(
                execution_id=execution.id, job_id=execution.job_id, organization_id=execution.organization_id,
                status=S.SKIPPED, finished_at=now, skip_reason=reason,
            )])
    return changed


def defer_running(execution, until, *, error_kind="", error_message="", now=None):
    """Hand a claimed run back to wait (concurrency cap, open circuit); not an attempt."""
    values = dict(status=S.QUEUED, next_attempt_at=until, published_at=None, lease_expires_at=None)
    if error_kind:
        values.update(error_kind=error_kind, error_message=error_message)
    running = held(execution)
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
        changed = held(execution).update(
            status=S.FAILED, error_kind=error_kind, error_message=error_message, finished_at=now,
            lease_expires_at=None,
        )
        if changed:
            _update_job_health(execution.job_id, S.FAILED, now, auto_disable_after)
            events.changed([execution], S.FAILED, S.RUNNING, now, error_kind=error_kind)
            run_outcome_hooks([RunOutcome(
                execution_id=execution.id, job_id=execution.job_id, organization_id=execution.organization_id,
                status=S.FAILED, finished_at=now, error_kind=error_kind, error_message=error_message,
            )])
    return changed
