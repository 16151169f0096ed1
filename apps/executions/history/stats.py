"""Run statistics of a job or an organization: what the stats API and the job page show.

Two sources: the daily roll-ups (JobDayStats, apps.executions.usage.rollups:
final for days before yesterday, and kept after the retention purge) and the raw Execution
rows for the rest of the window.
Raw rows are aggregated in the database (PostgreSQL's percentile_disc), over a range of
``scheduled_for`` that the (job|organization, -scheduled_for) indexes serve.

Percentiles are nearest-rank. Within raw rows they are exact; across roll-up days they
are merged as the run-weighted mean of each day's percentile, which is an approximation
(percentiles do not add up): the result says which one it is.
"""

from datetime import datetime, time, timedelta, timezone as dt_timezone

from django.db.models import Aggregate, Count, DurationField, ExpressionWrapper, FloatField, Max, Q

from apps.sql.modes import on_postgresql
from cronsvc import statuses

from ..lateness import ATTEMPT_LATENESS_PG, lateness_ms
from ..models import Attempt, Execution, JobDayStats

UTC = dt_timezone.utc
S = Execution.Status
# Sorted, so each query reads the same whatever the process.
COUNTED = tuple(sorted(statuses.RAN))
FAILED = tuple(sorted(statuses.FAILED))
FINISHED = tuple(sorted(statuses.FINAL))
PERCENTILES = (("p50", 0.50), ("p95", 0.95), ("p99", 0.99))
#: Stats API windows. Days are UTC days.
WINDOWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
#: Roll-up rows for days before this many days ago are final (yesterday's is still updated).
FINAL_AFTER_DAYS = 2
#: Most raw rows read into Python where the database cannot compute percentiles (SQLite).
MAX_ROWS = 200_000


def percentile(sorted_values, fraction):
    """Nearest-rank percentile of an ascending list (None when empty): PERCENTILE_DISC."""
    if not sorted_values:
        return None
    rank = max(1, -(-len(sorted_values) * fraction // 1))  # ceil
    return sorted_values[int(rank) - 1]


# --- the stats API


def window_stats(window, now, *, organization, job=None, project_ids=None):
    """Stats of ``job``, or of every job of ``organization`` (in ``project_ids`` when given),
    for the ``window`` (a WINDOWS key) ending at ``now``."""
    start = now - WINDOWS[window]
    rollups = _rollups(organization, job, project_ids)
    days = _rolled_up_days(rollups, start, now)
    raw = _executions(organization, job, project_ids)
    groups = []
    if days:
        first, last = days
        groups += [_day_group(row) for row in rollups.filter(day__gte=first, day__lte=last)]
        groups.append(_raw_group(raw, start, _midnight(first)))
        groups.append(_raw_group(raw, _midnight(last + timedelta(days=1)), now + END))
    else:
        groups.append(_raw_group(raw, start, now + END))
    return _summary(window, start, now, [g for g in groups if g["runs"]], exact=not days)


END = timedelta(microseconds=1)  # the window includes its end: runs scheduled at ``now`` count


def _executions(organization, job, project_ids):
    rows = Execution.objects.for_organization(organization)
    if job is not None:
        return rows.filter(job=job)
    return rows if project_ids is None else rows.filter(job__project_id__in=project_ids)


def _rollups(organization, job, project_ids):
    rows = JobDayStats.objects.filter(organization=organization)
    if job is not None:
        return rows.filter(job=job)
    return rows if project_ids is None else rows.filter(job__project_id__in=project_ids)


def _rolled_up_days(rollups, start, now):
    """(first, last) UTC days of the window to read from roll-ups, or None: whole days
    inside the window, final, and not past the last day rolled up."""
    start = start.astimezone(UTC)
    first = start.date() if start == _midnight(start.date()) else start.date() + timedelta(days=1)
    last = now.astimezone(UTC).date() - timedelta(days=FINAL_AFTER_DAYS)
    if last < first:
        return None
    rolled = rollups.filter(day__gte=first, day__lte=last).aggregate(last=Max("day"))["last"]
    return (first, rolled) if rolled is not None else None


def _midnight(day):
    return datetime.combine(day, time(0), tzinfo=UTC)


def _day_group(row):
    kinds = dict(row.error_kinds or {})
    unnamed = row.failed - sum(kinds.values())  # the roll-ups leave out failures without a kind
    if unnamed > 0:
        kinds["unknown"] = kinds.get("unknown", 0) + unnamed
    return {
        "runs": row.succeeded + row.failed + row.skipped, "succeeded": row.succeeded, "failed": row.failed,
        "skipped": row.skipped, "error_kinds": kinds,
        "duration_ms": {name: getattr(row, f"duration_{name}_ms") for name, _ in PERCENTILES},
        "lateness_ms": {name: getattr(row, f"lateness_{name}_ms") for name, _ in PERCENTILES},
        # Weights for merging: a day's percentiles stand for its runs.
        "weight": row.succeeded + row.failed,
    }


class PercentileDisc(Aggregate):
    """PostgreSQL's nearest-rank percentile; NULLs are left out."""

    function = "PERCENTILE_DISC"
    template = "%(function)s(%(fraction)s) WITHIN GROUP (ORDER BY %(expressions)s)"

    def __init__(self, expression, fraction, **extra):
        super().__init__(expression, fraction=float(fraction), **extra)


LATENESS = ExpressionWrapper(ATTEMPT_LATENESS_PG, output_field=DurationField())  # jitter left out


def _raw_group(executions, start, end):
    """Exact figures of the finished runs scheduled in [start, end) (as UTC days are cut)."""
    rows = executions.filter(scheduled_for__gte=start, scheduled_for__lt=end, status__in=FINISHED)
    counts = {"succeeded": Count("pk", filter=Q(status=S.SUCCEEDED)),
              "failed": Count("pk", filter=Q(status__in=FAILED)),
              "skipped": Count("pk", filter=Q(status=S.SKIPPED))}
    if on_postgresql():
        group = _pg_figures(rows, counts)
    else:
        group = _python_figures(rows, counts)
    group["runs"] = group["succeeded"] + group["failed"] + group["skipped"]
    group["weight"] = group["succeeded"] + group["failed"]
    if group["failed"]:
        kinds = rows.filter(status__in=FAILED).values("error_kind").annotate(n=Count("pk")).order_by()
        group["error_kinds"] = {row["error_kind"] or "unknown": row["n"] for row in kinds}
    else:
        group["error_kinds"] = {}
    return group


def _first_attempts(rows):
    # Lateness is measured at the first attempt (a retry starts late on purpose), as the
    # roll-ups measure it: Execution.started_at is the latest attempt's.
    return Attempt.objects.filter(number=1, execution__in=rows.values("pk"))


def _pg_figures(rows, counts):
    figures = rows.aggregate(**counts)
    durations = {f"d_{name}": PercentileDisc("duration_ms", fraction, output_field=FloatField())
                 for name, fraction in PERCENTILES}
    lateness = {f"l_{name}": PercentileDisc(LATENESS, fraction, output_field=DurationField())
                for name, fraction in PERCENTILES}
    anything = figures["succeeded"] + figures["failed"]
    values = rows.filter(status__in=COUNTED).aggregate(**durations) if anything else {}
    values.update(_first_attempts(rows).aggregate(**lateness) if anything else {})
    figures["duration_ms"] = {name: _int(values.get(f"d_{name}")) for name, _ in PERCENTILES}
    figures["lateness_ms"] = {name: _ms(values.get(f"l_{name}")) for name, _ in PERCENTILES}
    return figures


def _python_figures(rows, counts):
    figures = rows.aggregate(**counts)
    durations = sorted(d for d in rows.filter(status__in=COUNTED, duration_ms__isnull=False)
                       .values_list("duration_ms", flat=True)[:MAX_ROWS])
    lateness = sorted(lateness_ms(*row) for row in _first_attempts(rows).values_list(
        "started_at", "execution__scheduled_for", "execution__jitter_seconds")[:MAX_ROWS])
    figures["duration_ms"] = {name: percentile(durations, f) for name, f in PERCENTILES}
    figures["lateness_ms"] = {name: percentile(lateness, f) for name, f in PERCENTILES}
    return figures


def _int(value):
    return None if value is None else int(value)


def _ms(delta):
    return None if delta is None else round(delta.total_seconds() * 1000)


def _summary(window, start, now, groups, *, exact):
    succeeded = sum(g["succeeded"] for g in groups)
    failed = sum(g["failed"] for g in groups)
    kinds = {}
    for g in groups:
        for kind, n in g["error_kinds"].items():
            kinds[kind] = kinds.get(kind, 0) + n
    if len(groups) > 1:
        exact = False  # percentiles of several sources are merged
    return {
        "window": window, "start": start, "end": now,
        "runs": sum(g["runs"] for g in groups), "succeeded": succeeded, "failed": failed,
        "skipped": sum(g["skipped"] for g in groups),
        "success_rate": round(100 * succeeded / (succeeded + failed), 2) if succeeded + failed else None,
        "failures_by_kind": dict(sorted(kinds.items(), key=lambda item: (-item[1], item[0]))),
        "duration_ms": _merged(groups, "duration_ms"), "lateness_ms": _merged(groups, "lateness_ms"),
        "percentiles": "exact" if exact else "approximate",
    }


def _merged(groups, field):
    """One group: its own percentiles. Several: run-weighted mean of each percentile."""
    merged = {}
    for name, _ in PERCENTILES:
        pairs = [(g[field][name], g["weight"]) for g in groups if g[field][name] is not None and g["weight"]]
        total = sum(weight for _, weight in pairs)
        merged[name] = round(sum(value * weight for value, weight in pairs) / total) if total else None
    return merged


# --- the job page's charts: success rate and durations per time bucket, from raw rows

RANGES = {  # name -> (span, bucket)
    "24h": (timedelta(hours=24), timedelta(hours=1)),
    "7d": (timedelta(days=7), timedelta(hours=6)),
    "30d": (timedelta(days=30), timedelta(days=1)),
}


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
