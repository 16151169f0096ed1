"""Writing what happened to a run: its attempt, its new state, and the job's health.

Each function is one transaction, and each guards its update with the status it expects
(``running``), so a run whose lease the sweeper already took back is not overwritten.
"""

import logging

from django.db import transaction
from django.db.models import F

from apps.jobs.models import Job

from .models import Attempt, Execution

log = logging.getLogger(__name__)

S = Execution.Status
FAILURES = (S.FAILED, S.TIMED_OUT, S.DEAD)


def record_attempt(execution, *, attempt, status, next_attempt_at, auto_disable_after):
    """Store one finished attempt and move the execution on.

    ``attempt`` is an unsaved Attempt; ``status`` the execution's new status (``queued``
    for a retry waiting until ``next_attempt_at``)."""
    with transaction.atomic():
        attempt.save()
        changed = _finish(execution, status, attempt, next_attempt_at)
        if changed and status != S.QUEUED:
            _update_job_health(execution.job_id, status, attempt.started_at, auto_disable_after)
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
    if not changed:
        log.warning("execution %s: lease lost before its attempt %d was recorded", execution.id, attempt.number)
    return changed


def _update_job_health(job_id, status, ran_at, auto_disable_after):
    jobs = Job.objects.filter(id=job_id)
    if status == S.SUCCEEDED:
        jobs.update(last_run_at=ran_at, last_status=status, consecutive_failures=0)
    elif status in FAILURES:
        jobs.update(last_run_at=ran_at, last_status=status, consecutive_failures=F("consecutive_failures") + 1)
        jobs.filter(enabled=True, consecutive_failures__gte=auto_disable_after).update(
            enabled=False,
            disabled_reason=f"Disabled automatically after {auto_disable_after} consecutive failed runs.",
        )


def skip_running(execution, reason, now):
    """A claimed run that must not go ahead (e.g. its previous run is still going)."""
    return Execution.objects.filter(id=execution.id, status=S.RUNNING).update(
        status=S.SKIPPED, skip_reason=reason, finished_at=now, lease_expires_at=None,
    )


def defer_running(execution, until, *, error_kind="", error_message=""):
    """Hand a claimed run back to wait (concurrency cap, open circuit); not an attempt."""
    values = dict(status=S.QUEUED, next_attempt_at=until, published_at=None, lease_expires_at=None)
    if error_kind:
        values.update(error_kind=error_kind, error_message=error_message)
    return Execution.objects.filter(id=execution.id, status=S.RUNNING).update(**values)


def fail_running(execution, *, error_kind, error_message, now, auto_disable_after):
    """A run that cannot even be sent (e.g. its body template no longer renders)."""
    with transaction.atomic():
        changed = Execution.objects.filter(id=execution.id, status=S.RUNNING).update(
            status=S.FAILED, error_kind=error_kind, error_message=error_message, finished_at=now,
            lease_expires_at=None,
        )
        if changed:
            _update_job_health(execution.job_id, S.FAILED, now, auto_disable_after)
    return changed
