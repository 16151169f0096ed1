"""The operators' dashboard in the admin: the last hour of the platform at a glance.

The executions and attempts tables may hold millions of rows, so every query is bounded
by the primary key: execution ids are UUIDv7 (time-ordered), and ``id >= floor(now - 1h)``
is a range scan of the last hour only. Percentiles and hosts come from a capped sample of
the most recent rows."""

import uuid
from collections import Counter
from datetime import timedelta
from urllib.parse import urlsplit

from django.contrib import admin
from django.db.models import Count, Q
from django.db.models.functions import TruncMinute
from django.template.response import TemplateResponse

from apps.executions.scheduling.broker_queues import known_queues, queue_depths
from apps.executions.models import Attempt, Execution
from apps.sql import clock
from cronsvc.statuses import FAILED, RAN

from . import heartbeats

WINDOW = timedelta(hours=1)
SAMPLE = 5000
FINISHED = RAN


def id_floor(since):
    """The smallest UUIDv7 made at ``since``: every execution created later is above it."""
    return uuid.UUID(int=(int(since.timestamp() * 1000) & ((1 << 48) - 1)) << 80)


def runs_per_minute(now):
    since = now - WINDOW
    rows = (
        Execution.objects.filter(id__gte=id_floor(since), finished_at__gte=since, status__in=FINISHED)
        .annotate(minute=TruncMinute("finished_at")).values("minute")
        .annotate(total=Count("id"), failed=Count("id", filter=Q(status__in=FAILED))).order_by("minute")
    )
    return [{"minute": row["minute"], "total": row["total"], "failed": row["failed"]} for row in rows]


def start_lag(now):
    """p50/p95 seconds from a scheduled run's due time to its first claim by a worker."""
    rows = (
        Execution.objects.filter(id__gte=id_floor(now - WINDOW), trigger=Execution.Trigger.SCHEDULE,
                                 started_at__isnull=False, attempt__lte=1)
        .order_by("-id").values_list("scheduled_for", "started_at")[:SAMPLE]
    )
    lags = sorted(max(0.0, (started - due).total_seconds()) for due, started in rows)
    return {"p50": _percentile(lags, 0.50), "p95": _percentile(lags, 0.95), "sample": len(lags)}


def _percentile(ordered, q):
    if not ordered:
        return None
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def top_failing_hosts(now, limit=10):
    urls = (
        Attempt.objects.filter(execution_id__gte=id_floor(now - WINDOW), outcome="failed")
        .order_by("-id").values_list("request_url", flat=True)[:SAMPLE]
    )
    return Counter((urlsplit(url).hostname or "?") for url in urls).most_common(limit)


def summary(now):
    minutes = runs_per_minute(now)
    total = sum(row["total"] for row in minutes)
    failed = sum(row["failed"] for row in minutes)
    peak = max((row["total"] for row in minutes), default=0)
    for row in minutes:
        row["width"] = round(100 * row["total"] / peak) if peak else 0
    try:
        depths = sorted(queue_depths(known_queues()).items())
        depth_error = ""
    except Exception as exc:  # noqa: BLE001 - the page still renders with the broker down
        depths, depth_error = [], f"{exc.__class__.__name__}: {exc}"
    return {
        "minutes": minutes, "total": total, "failed": failed,
        "failure_rate": round(100 * failed / total, 1) if total else None,
        "lag": start_lag(now), "hosts": top_failing_hosts(now),
        "queues": depths, "queue_error": depth_error, "processes": heartbeats.snapshot(now),
    }


def dashboard(request):
    """Staff only: wrapped in admin.site.admin_view in config/urls.py."""
    context = {**admin.site.each_context(request), "title": "Operations", "now": clock.database_now()}
    context.update(summary(context["now"]))
    return TemplateResponse(request, "observability/dashboard.html", context)
