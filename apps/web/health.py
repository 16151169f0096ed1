"""A job's health as the dashboard shows it, and the same rule as a database filter.

One status per job, the first that applies: expired (its schedule has no run left),
disabled (turned off automatically after failures), paused (turned off by someone),
failing (its last run or runs failed), healthy.
"""

from datetime import timedelta

from django.db.models import Count, Max, OuterRef, Q, Subquery
from django.db.models.functions import TruncHour

from apps.executions.models import Execution

STATUSES = ("healthy", "failing", "paused", "disabled", "expired")
FAILED = (Execution.Status.FAILED, Execution.Status.TIMED_OUT, Execution.Status.DEAD)

_Q = {
    "expired": Q(expired_at__isnull=False),
    "disabled": Q(expired_at__isnull=True, enabled=False) & ~Q(disabled_reason=""),
    "paused": Q(expired_at__isnull=True, enabled=False, disabled_reason=""),
    "failing": Q(expired_at__isnull=True, enabled=True, consecutive_failures__gt=0),
    "healthy": Q(expired_at__isnull=True, enabled=True, consecutive_failures=0),
}


def job_health(job):
    if job.expired_at is not None:
        return "expired"
    if not job.enabled:
        return "disabled" if job.disabled_reason else "paused"
    return "failing" if job.consecutive_failures else "healthy"


def health_filter(status):
    return _Q[status]


def with_last_duration(jobs):
    """Annotate each job with the duration of its latest finished execution."""
    latest = (Execution.objects.filter(job=OuterRef("pk"), finished_at__isnull=False)
              .order_by("-finished_at").values("duration_ms")[:1])
    return jobs.annotate(last_duration_ms=Subquery(latest))


def success_strips(organization, job_ids, now, hours=24):
    """{job id: [24 cells, oldest first]}; a cell is "ok", "failed", "mixed" or "none"."""
    since = (now - timedelta(hours=hours - 1)).replace(minute=0, second=0, microsecond=0)
    rows = (Execution.objects.for_organization(organization)
            .filter(job_id__in=job_ids, scheduled_for__gte=since)
            .annotate(hour=TruncHour("scheduled_for"))
            .values("job_id", "hour")
            .annotate(ok=Count("pk", filter=Q(status=Execution.Status.SUCCEEDED)),
                      bad=Count("pk", filter=Q(status__in=FAILED)), last=Max("scheduled_for")))
    cells = {}
    for row in rows:
        index = int((row["hour"] - since).total_seconds() // 3600)
        if 0 <= index < hours:
            kind = "mixed" if row["ok"] and row["bad"] else "ok" if row["ok"] else "failed" if row["bad"] else "none"
            cells[(row["job_id"], index)] = (kind, row["ok"], row["bad"])
    strips = {}
    for job_id in job_ids:
        strip = []
        for index in range(hours):
            kind, ok, bad = cells.get((job_id, index), ("none", 0, 0))
            strip.append({"kind": kind, "ok": ok, "bad": bad, "hour": since + timedelta(hours=index)})
        strips[job_id] = strip
    return strips
