"""Daily roll-ups per job: counts, percentiles, lateness, error kinds; idempotent."""

from datetime import date, timedelta

from apps.executions.models import Attempt, Execution, JobDayStats
from apps.executions.usage.rollups import percentile, roll_up
from tests.conftest import utc

S = Execution.Status


def make_run(job, scheduled_for, status, *, duration=None, late_ms=None, error_kind="", attempts=1):
    execution = Execution.objects.create(job=job, organization=job.organization, scheduled_for=scheduled_for,
                                         status=status, duration_ms=duration, error_kind=error_kind,
                                         attempt=attempts)
    if late_ms is not None:
        Attempt.objects.create(execution=execution, number=1, request_method="GET", request_url=job.url,
                               started_at=scheduled_for + timedelta(milliseconds=late_ms), outcome="x")
    return execution


def test_percentile_is_nearest_rank():
    assert percentile([], 50) is None
    assert percentile([5], 99) == 5
    values = list(range(1, 101))
    assert (percentile(values, 50), percentile(values, 95), percentile(values, 99)) == (50, 95, 99)


def test_roll_up_counts_one_day_per_job(tenant, make_job):
    job, other = make_job(tenant), make_job(tenant)
    day = date(2026, 3, 10)
    for minute, duration in enumerate(range(10, 110, 10)):  # 10 succeeded runs, 10..100 ms
        make_run(job, utc(2026, 3, 10, 1, minute), S.SUCCEEDED, duration=duration, late_ms=minute * 100)
    make_run(job, utc(2026, 3, 10, 2, 0), S.FAILED, error_kind="http_status", attempts=3)
    make_run(job, utc(2026, 3, 10, 2, 5), S.TIMED_OUT, error_kind="timeout")
    make_run(job, utc(2026, 3, 10, 2, 10), S.DEAD, error_kind="http_status")
    make_run(job, utc(2026, 3, 10, 2, 15), S.SKIPPED)
    make_run(job, utc(2026, 3, 11, 0, 0), S.SUCCEEDED)  # the next day: not counted
    make_run(other, utc(2026, 3, 10, 23, 59), S.SUCCEEDED)

    assert roll_up(day) == 2
    stats = JobDayStats.objects.get(job=job, day=day)
    assert (stats.runs, stats.succeeded, stats.failed, stats.skipped) == (14, 10, 3, 1)
    assert stats.attempts == 16
    assert (stats.duration_p50_ms, stats.duration_p95_ms, stats.duration_p99_ms) == (50, 100, 100)
    assert (stats.lateness_p50_ms, stats.lateness_p99_ms) == (400, 900)
    assert stats.error_kinds == {"http_status": 2, "timeout": 1}
    assert stats.organization_id == tenant.organization.id
    assert JobDayStats.objects.get(job=other, day=day).runs == 1


def test_roll_up_is_an_idempotent_upsert(tenant, make_job, other_tenant):
    job = make_job(tenant)
    theirs = make_job(other_tenant)
    make_run(job, utc(2026, 3, 10, 1, 0), S.SUCCEEDED)
    make_run(theirs, utc(2026, 3, 10, 1, 0), S.SUCCEEDED)
    roll_up(date(2026, 3, 10), organization=tenant.organization)
    make_run(job, utc(2026, 3, 10, 5, 0), S.FAILED)
    roll_up(date(2026, 3, 10), organization=tenant.organization)
    assert JobDayStats.objects.filter(job=job).count() == 1
    assert (JobDayStats.objects.get(job=job).runs, JobDayStats.objects.get(job=job).failed) == (2, 1)
    assert not JobDayStats.objects.filter(job=theirs).exists()


def test_the_database_and_the_python_paths_agree(tenant, make_job):
    """PostgreSQL computes the figures in SQL; embedded SQLite in Python: the same numbers."""
    from apps.executions.usage.rollups import _pg_stats_rows, _runs_of, _stats_row

    jobs = [make_job(tenant), make_job(tenant)]
    for i in range(37):
        status = [S.SUCCEEDED, S.FAILED, S.SKIPPED, S.TIMED_OUT][i % 4]
        make_run(jobs[i % 2], utc(2026, 3, 10, 3, i), status, duration=(i * 37) % 101 or None,
                 late_ms=(i * 53) % 997 if i % 3 else None, error_kind="timeout" if status == S.TIMED_OUT else "")
    now = utc(2026, 3, 11)
    fields = ["job_id", "runs", "succeeded", "failed", "skipped", "attempts", "duration_p50_ms", "duration_p95_ms",
              "duration_p99_ms", "lateness_p50_ms", "lateness_p95_ms", "lateness_p99_ms", "error_kinds"]

    def figures(rows):
        return sorted([tuple(getattr(row, f) for f in fields) for row in rows], key=str)

    in_sql = _pg_stats_rows(date(2026, 3, 10), tenant.organization, now)
    in_python = [_stats_row(job_id, org_id, date(2026, 3, 10), runs, now)
                 for (job_id, org_id), runs in _runs_of(date(2026, 3, 10), tenant.organization).items()]
    assert figures(in_sql) == figures(in_python) and len(in_sql) == 2
