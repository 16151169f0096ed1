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
from cronsvc.statuses import CANCELLED, FAILED

from . import events
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


def _cursor():
    import psycopg

    connection.ensure_connection()
    # A server-side-binding cursor on Django's connection (same transaction): the arrays
    # go out in binary instead of being quoted into the SQL text.
    return psycopg.Cursor(connection.connection)


def _finish_many(results):
    from psycopg.types.json import Jsonb

    table = connection.ops.quote_name(Execution._meta.db_table)
    sql = (
        f"UPDATE {table} AS e SET status = v.status, attempt = v.attempt, duration_ms = v.duration_ms, "
        "response_status = v.response_status, response_headers = v.response_headers, "
        "response_body = v.response_body, remote_addr = v.remote_addr, error_kind = v.error_kind, "
        "error_message = v.error_message, lease_expires_at = NULL, next_attempt_at = v.next_attempt_at, "
        # a retry waits for the scheduler to publish it when next_attempt_at comes
        f"published_at = CASE WHEN v.status = '{S.QUEUED}' THEN NULL ELSE e.published_at END, "
        f"finished_at = CASE WHEN v.status = '{S.QUEUED}' THEN e.finished_at ELSE v.finished_at END "
        "FROM unnest(%b::uuid[], %b::text[], %b::smallint[], %b::integer[], %b::smallint[], %b::jsonb[], "
        "%b::text[], %b::text[], %b::text[], %b::text[], %b::timestamptz[], %b::timestamptz[]) "
        "AS v(id, status, attempt, duration_ms, response_status, response_headers, response_body, "
        "remote_addr, error_kind, error_message, next_attempt_at, finished_at) "
        f"WHERE e.id = v.id AND e.status = '{S.RUNNING}'"
    )
    if outbox.enabled():
        # the same statement writes each moved run's event from the rows it updated
        sql = (f"WITH upd AS ({sql} RETURNING e.*, v.finished_at AS changed_at), "
               f"ev AS ({outbox.insert_sql(_OUTCOME_EVENTS)}) SELECT id FROM upd")
    else:
        sql += " RETURNING e.id"
    columns = [[] for _ in range(12)]
    for result in results:
        a = result.attempt
        row = (result.execution.id, result.status, a.number, a.duration_ms, a.response_status,
               Jsonb(a.response_headers), a.response_body, a.remote_addr, a.error_kind, a.error_message,
               result.next_attempt_at, a.finished_at)
        for column, value in zip(columns, row):
            column.append(value)
    with _cursor() as cursor:
        cursor.execute(sql, columns)
        return {row[0] for row in cursor.fetchall()}


_OUTCOME_EVENTS = (
    f"SELECT 'execution', u.status, '{S.RUNNING}', u.organization_id, j.project_id, u.job_id, u.id, u.attempt, "
    f"CASE WHEN u.status = '{S.QUEUED}' THEN 'retry' ELSE '' END, jsonb_strip_nulls(jsonb_build_object("
    f"'scheduled_for', {outbox.utc_sql('u.scheduled_for')}, 'trigger', u.trigger, "
    "'error_kind', NULLIF(u.error_kind, ''), 'response_status', u.response_status, 'duration_ms', u.duration_ms, "
    f"'next_attempt_at', {outbox.utc_sql('u.next_attempt_at')})), "
    "u.changed_at "
    f"FROM upd u LEFT JOIN {Job._meta.db_table} j ON j.id = u.job_id"
)


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

    table = connection.ops.quote_name(Attempt._meta.db_table)
    sql = (
        f"INSERT INTO {table} (execution_id, number, started_at, finished_at, duration_ms, request_method, "
        "request_url, request_headers, request_body, response_status, response_headers, response_body, "
        "remote_addr, outcome, error_kind, error_message) "
        "SELECT * FROM unnest(%b::uuid[], %b::smallint[], %b::timestamptz[], %b::timestamptz[], %b::integer[], "
        "%b::text[], %b::text[], %b::jsonb[], %b::text[], %b::smallint[], %b::jsonb[], %b::text[], %b::text[], "
        "%b::text[], %b::text[], %b::text[])"
        + (" ON CONFLICT (execution_id, number) DO NOTHING RETURNING execution_id" if lease_lost else "")
    )
    columns = [[] for _ in range(16)]
    for result in results:
        a = result.attempt
        row = (result.execution.id, a.number, a.started_at, a.finished_at, a.duration_ms, a.request_method,
               a.request_url, Jsonb(a.request_headers), a.request_body, a.response_status,
               Jsonb(a.response_headers), a.response_body, a.remote_addr, a.outcome, a.error_kind,
               a.error_message)
        for column, value in zip(columns, row):
            column.append(value)
    with _cursor() as cursor:
        cursor.execute(sql, columns)
        if lease_lost:
            return {row[0] for row in cursor.fetchall()}
    return {result.execution.id for result in results}


def _update_jobs_health(results):
    """``_update_job_health`` for each result in turn, as one statement: per job, the
    failures before its first success in the group add to its count, a success resets it,
    and the job is disabled if any streak of failures reached its threshold."""
    per_job = {}
    for result in results:
        if result.status == S.SUCCEEDED or result.status in FAILED:
            per_job.setdefault(result.execution.job_id, []).append(result)
    if not per_job:
        return
    columns = [[] for _ in range(8)]
    for job_id in sorted(per_job):  # the same lock order in every group: no deadlock between two
        runs = per_job[job_id]
        threshold = runs[-1].auto_disable_after
        head = tail = 0
        reset = disable = False
        for result in runs:
            if result.status == S.SUCCEEDED:
                reset, tail = True, 0
            elif reset:
                tail += 1
                disable = disable or tail >= threshold
            else:
                head += 1
        last = runs[-1]
        row = (job_id, last.attempt.started_at, last.status, reset, head, tail, disable, threshold)
        for column, value in zip(columns, row):
            column.append(value)
    reason = "'Disabled automatically after ' || v.threshold || ' consecutive failed runs.'"
    disabling = ("j.enabled AND v.threshold > 0 "  # 0: the plan never disables jobs
                 "AND (v.disable OR (v.head > 0 AND j.consecutive_failures + v.head >= v.threshold))")
    table = connection.ops.quote_name(Job._meta.db_table)
    sql = (
        f"UPDATE {table} AS j SET last_run_at = v.ran_at, last_status = v.status, "
        "consecutive_failures = CASE WHEN v.reset THEN v.tail ELSE j.consecutive_failures + v.head END, "
        f"enabled = CASE WHEN {disabling} THEN false ELSE j.enabled END, "
        f"disabled_reason = CASE WHEN {disabling} THEN {reason} ELSE j.disabled_reason END "
        "FROM unnest(%b::uuid[], %b::timestamptz[], %b::text[], %b::bool[], %b::integer[], %b::integer[], "
        "%b::bool[], %b::integer[]) AS v(id, ran_at, status, reset, head, tail, disable, threshold) "
        "WHERE j.id = v.id"
    )
    with _cursor() as cursor:
        cursor.execute(sql, columns)


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
    jobs = Job.objects.filter(id=job_id)
    if status == S.SUCCEEDED:
        jobs.update(last_run_at=ran_at, last_status=status, consecutive_failures=0)
    elif status in FAILED:
        jobs.update(last_run_at=ran_at, last_status=status, consecutive_failures=F("consecutive_failures") + 1)
        if not auto_disable_after:
            return  # the plan never disables jobs
        jobs.filter(enabled=True, consecutive_failures__gte=auto_disable_after).update(
            enabled=False,
            disabled_reason=f"Disabled automatically after {auto_disable_after} consecutive failed runs.",
        )


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
