"""A job's health, one rule for the dashboard, the API's ?health= filter and status badges.

One status per job, the first that applies: expired (its schedule has no run left),
disabled (turned off automatically after failures), paused (turned off by someone),
failing (its last run or runs failed), new (it has not run yet: "healthy" would claim
what nobody knows), healthy. Read from the job's own columns, so it
needs no query on the executions.
"""

from django.db.models import Q

STATUSES = ("new", "healthy", "failing", "paused", "disabled", "expired")

_Q = {
    "expired": Q(expired_at__isnull=False),
    "disabled": Q(expired_at__isnull=True, enabled=False) & ~Q(disabled_reason=""),
    "paused": Q(expired_at__isnull=True, enabled=False, disabled_reason=""),
    "failing": Q(expired_at__isnull=True, enabled=True, consecutive_failures__gt=0),
    "new": Q(expired_at__isnull=True, enabled=True, consecutive_failures=0, last_run_at__isnull=True),
    "healthy": Q(expired_at__isnull=True, enabled=True, consecutive_failures=0, last_run_at__isnull=False),
}


def job_health(job):
    if job.expired_at is not None:
        return "expired"
    if not job.enabled:
        return "disabled" if job.disabled_reason else "paused"
    if job.consecutive_failures:
        return "failing"
    return "new" if job.last_run_at is None else "healthy"


def health_filter(status):
    """The jobs whose health is ``status`` (one of STATUSES), as a Q for Job querysets."""
    return _Q[status]
