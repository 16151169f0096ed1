"""Success rate and duration percentiles of a job's stored executions, per time bucket."""

from datetime import timedelta

from apps.executions.models import Execution

RANGES = {  # name -> (span, bucket)
    "24h": (timedelta(hours=24), timedelta(hours=1)),
    "7d": (timedelta(days=7), timedelta(hours=6)),
    "30d": (timedelta(days=30), timedelta(days=1)),
}
MAX_ROWS = 200_000
S = Execution.Status
COUNTED = (S.SUCCEEDED, S.FAILED, S.TIMED_OUT, S.DEAD)


def percentile(sorted_values, fraction):
    """Nearest-rank percentile of an ascending list (None when empty)."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * fraction // 1))  # ceil
    return sorted_values[int(rank) - 1]


def job_stats(job, range_name, now):
    span, bucket = RANGES[range_name]
    start = now - span
    rows = (Execution.objects.for_organization(job.organization_id).filter(
        job=job, status__in=COUNTED, scheduled_for__gt=start, scheduled_for__lte=now)
        .values_list("scheduled_for", "status", "duration_ms")[:MAX_ROWS])
    count = int(span / bucket)
    buckets = [{"ok": 0, "total": 0, "durations": []} for _ in range(count)]
    for at, status, duration in rows:
        index = min(count - 1, int((at - start) / bucket))
        b = buckets[index]
        b["total"] += 1
        b["ok"] += status == S.SUCCEEDED
        if duration is not None:
            b["durations"].append(duration)
    labels, success, p50, p95 = [], [], [], []
    all_durations, ok_total, total = [], 0, 0
    for index, b in enumerate(buckets):
        end = start + bucket * (index + 1)
        labels.append(end.isoformat())
        durations = sorted(b["durations"])
        all_durations += durations
        ok_total += b["ok"]
        total += b["total"]
        success.append(round(100 * b["ok"] / b["total"], 1) if b["total"] else None)
        p50.append(percentile(durations, 0.5))
        p95.append(percentile(durations, 0.95))
    all_durations.sort()
    return {
        "range": range_name, "timezone": job.timezone, "labels": labels, "success_rate": success, "p50_ms": p50, "p95_ms": p95,
        "bucket_hours": bucket.total_seconds() / 3600,
        "summary": {"runs": total, "succeeded": ok_total,
                    "success_rate": round(100 * ok_total / total, 1) if total else None,
                    "p50_ms": percentile(all_durations, 0.5), "p95_ms": percentile(all_durations, 0.95)},
    }
