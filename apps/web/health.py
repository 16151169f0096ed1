"""The dashboard's job list: health (the rule lives in apps.jobs.health, shared with the
API and badges), the last run's duration and the 24-hour success strips."""

from datetime import timedelta

from django.db.models import Count, Max, OuterRef, Q, Subquery
from django.db.models.functions import TruncHour

from apps.executions.models import Execution
from apps.jobs.health import STATUSES, health_filter, job_health  # noqa: F401
from cronsvc.statuses import FAILED


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
