"""A worker's side of a run: claim a batch, admit each run, send, record.

The HTTP requests of a batch run concurrently on a process-wide thread pool, so one slow
endpoint never holds up the other runs of its batch; the database work stays on the
task's own thread (a handful of connections per process, whatever the in-flight count).
"""

import logging
import os
import random
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

import cronsvc
from cronsvc.delivery.breaker import COUNTED_FAILURES, host_key
from cronsvc.delivery.client import deliver
from cronsvc.delivery.errors import InvalidRequest
from cronsvc.delivery.outcome import SuccessCriteria, circuit_open, classify, parse_status_codes
from cronsvc.delivery.request import RequestSpec, prepare, standard_variables
from cronsvc.delivery.retry import RetryPolicy, next_delay, parse_retry_after, should_retry

from . import recording
from .models import Attempt, Execution
from .outbound import guards, http_session, outbound_policy, wall_clock

log = logging.getLogger("cronsvc.worker")

S = Execution.Status
RETRY_AFTER_STATUSES = (429, 503)
MASK = "••••"
SECRET_HEADERS = {"authorization", "proxy-authorization", "cookie", "x-api-key"}
_rng = random.SystemRandom()


@dataclass
class Run:
    execution: Execution
    holder: str = ""
    semaphore: object = None
    job_locked: bool = False
    attempt_number: int = 0
    started_at: object = None
    prepared: object = None
    sent_headers: dict = field(default_factory=dict)

    @property
    def job(self):
        return self.execution.job

    @property
    def plan(self):
        return self.execution.organization.plan


def run_batch(execution_ids, *, now=None):
    """Run the queued executions among ``execution_ids``; return how many were sent."""
    now = now or timezone.now()
    runs = [Run(execution) for execution in claim(execution_ids, now)]
    admitted = [run for run in runs if admit(run, now)]
    if not admitted:
        return 0
    futures = {_executor().submit(_send, run): run for run in admitted}
    for future in as_completed(futures):
        run = futures[future]
        try:
            record(run, future.result())
        finally:
            release(run)
    return len(admitted)


def claim(execution_ids, now):
    """Move the queued runs among ``execution_ids`` to ``running``, atomically: a
    duplicate or stale message finds nothing left to claim."""
    with transaction.atomic():
        executions = list(
            Execution.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(id__in=execution_ids, status=S.QUEUED)
            .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now + timedelta(seconds=1)))
            .select_related("job", "job__project", "organization__plan")
        )
        for timeout, group in _by_timeout(executions).items():
            lease_until = now + timedelta(seconds=timeout + settings.DELIVERY_LEASE_MARGIN)
            Execution.objects.filter(id__in=[e.id for e in group]).update(
                status=S.RUNNING, started_at=now, lease_expires_at=lease_until,
            )
    return executions


def _by_timeout(executions):
    groups = {}
    for execution in executions:
        groups.setdefault(execution.job.timeout_seconds, []).append(execution)
    return groups


def admit(run, now):
    """Apply the overlap lock, the organization's concurrency cap, the host's circuit
    breaker and the job's rate limit. Returns True when the run may be sent now."""
    execution, job = run.execution, run.job
    lease = job.timeout_seconds + settings.DELIVERY_LEASE_MARGIN
    run.holder = str(execution.id)
    shared = guards()
    if job.overlap_policy == job.OverlapPolicy.FORBID:
        if not shared.lock_job(str(job.id), run.holder, lease):
            recording.skip_running(execution, "overlap", now)
            return False
        run.job_locked = True
    run.semaphore = shared.concurrency(execution.organization_id, run.plan.max_concurrency, lease)
    if not run.semaphore.acquire(run.holder, wall_clock()):
        run.semaphore = None
        release(run)
        recording.defer_running(execution, now + timedelta(seconds=_defer_seconds()))
        return False
    if not _circuit_allows(run, shared, now) or not _rate_allows(run, shared, now):
        release(run)
        return False
    return _prepare(run, now)


def _rate_allows(run, shared, now):
    per_minute = run.job.rate_limit_per_minute
    if not per_minute:
        return True
    allowed, wait = shared.take_token(str(run.job.id), per_minute, wall_clock())
    if not allowed:
        recording.defer_running(run.execution, now + timedelta(seconds=max(wait, 0.5)))
    return allowed


def _defer_seconds():
    base = settings.DELIVERY_DEFER_SECONDS
    return base + _rng.uniform(0, base)


def _circuit_allows(run, shared, now):
    if shared.breaker is None:
        return True
    host = host_key(run.job.url)
    decision = shared.breaker.before_request(host, wall_clock())
    if decision.allowed:
        return True
    retry_at = decision.retry_at or wall_clock() + settings.BREAKER_COOLDOWN_SECONDS
    outcome = circuit_open(host, retry_at)
    until = now + timedelta(seconds=max(1.0, retry_at - wall_clock()))
    recording.defer_running(run.execution, until, error_kind=outcome.error_kind, error_message=outcome.message)
    return False


def _prepare(run, now):
    execution, job = run.execution, run.job
    run.attempt_number = execution.attempt + 1
    run.started_at = now
    try:
        run.prepared = prepare(
            request_spec(job),
            variables=standard_variables(
                job_id=job.id, job_name=job.name, execution_id=execution.id,
                scheduled_for=execution.scheduled_for, attempt=run.attempt_number, now=now,
            ),
            job_id=job.id, execution_id=execution.id, attempt=run.attempt_number,
            scheduled_for=execution.scheduled_for, signing_secrets=job.project.signing_secrets,
            timestamp=int(now.timestamp()), version=cronsvc.__version__,
        )
    except InvalidRequest as exc:
        release(run)
        recording.fail_running(execution, error_kind="invalid_request", error_message=exc.message, now=now,
                               auto_disable_after=run.plan.auto_disable_after_failures)
        return False
    return True


def request_spec(job):
    return RequestSpec(
        url=job.url, method=job.method, headers=job.headers or {}, body=job.body,
        body_format=job.body_format, auth=job.auth, connect_timeout=settings.DELIVERY_CONNECT_TIMEOUT,
        timeout=float(job.timeout_seconds), follow_redirects=job.follow_redirects,
    )


def _send(run):
    return deliver(run.prepared, session=http_session(), policy=outbound_policy(),
                   max_body_bytes=settings.RESPONSE_BODY_MAX_BYTES)


def record(run, result):
    job, plan = run.job, run.plan
    finished = timezone.now()
    outcome = classify(result, success_criteria(job))
    _feed_breaker(job.url, result, outcome)
    policy = retry_policy(job, plan)
    status, next_attempt_at = decide(outcome, result, run.attempt_number, policy, finished)
    attempt = Attempt(
        execution_id=run.execution.id, number=run.attempt_number, started_at=run.started_at,
        finished_at=finished, duration_ms=round(result.duration_ms),
        request_method=run.prepared.method, request_url=run.prepared.url,
        request_headers=masked(run.prepared.headers), request_body=_text(run.prepared.body),
        response_status=result.status_code, response_headers=result.headers,
        response_body=result.body_excerpt, remote_addr=result.remote_addr or "",
        outcome="succeeded" if outcome.succeeded else "failed",
        error_kind=outcome.error_kind or "", error_message="" if outcome.succeeded else outcome.message,
    )
    recording.record_attempt(run.execution, attempt=attempt, status=status, next_attempt_at=next_attempt_at,
                             auto_disable_after=plan.auto_disable_after_failures)


def decide(outcome, result, attempt, policy, now):
    """The execution's next status, and when to retry (None when final)."""
    if outcome.succeeded:
        return S.SUCCEEDED, None
    if should_retry(outcome, result.status_code, attempt, policy):
        retry_after = None
        if result.status_code in RETRY_AFTER_STATUSES:
            retry_after = parse_retry_after(result.headers.get("retry-after"), now)
        delay = next_delay(attempt, policy, retry_after=retry_after, rng=_rng)
        return S.QUEUED, now + timedelta(seconds=delay)
    retryable_kind = should_retry(outcome, result.status_code, min(attempt, policy.max_attempts - 1), policy)
    if retryable_kind:
        return S.DEAD, None
    if outcome.error_kind == "timeout":
        return S.TIMED_OUT, None
    return S.FAILED, None


def _feed_breaker(url, result, outcome):
    breaker = guards().breaker
    if breaker is None:
        return
    host = host_key(url)
    if outcome.error_kind in COUNTED_FAILURES:
        breaker.record_failure(host, wall_clock())
    elif result.status_code is not None:
        breaker.record_success(host)


def success_criteria(job):
    return SuccessCriteria(
        status_codes=parse_status_codes(job.success_status_codes or "200-299"),
        body_contains=job.success_body_contains or None,
        body_regex=job.success_body_regex or None,
    )


def retry_policy(job, plan):
    return RetryPolicy(
        max_attempts=max(1, min(job.max_attempts, plan.max_attempts)),
        initial_delay=job.retry_initial_delay_seconds, max_delay=job.retry_max_delay_seconds,
        multiplier=job.retry_multiplier, retry_on_timeout=job.retry_on_timeout,
    )


def masked(headers):
    return {name: (MASK if name.lower() in SECRET_HEADERS else value) for name, value in headers.items()}


def _text(body):
    return body.decode("utf-8", errors="replace")[: settings.RESPONSE_BODY_MAX_BYTES]


def release(run):
    shared = guards()
    if run.semaphore is not None:
        run.semaphore.release(run.holder)
        run.semaphore = None
    if run.job_locked:
        shared.unlock_job(str(run.job.id), run.holder)
        run.job_locked = False


_pool = {"pid": None, "executor": None}
_pool_lock = threading.Lock()


def _executor():
    """One pool per process (made after a fork, never inherited from the parent)."""
    with _pool_lock:
        if _pool["pid"] != os.getpid():
            _pool.update(pid=os.getpid(), executor=ThreadPoolExecutor(
                max_workers=settings.DELIVERY_MAX_INFLIGHT, thread_name_prefix="delivery"))
        return _pool["executor"]
