"""Run statistics on known data: counts, success rate, failures by kind, nearest-rank
percentiles (computed by hand below), the roll-up + raw merge, and window validation."""

from datetime import date, timedelta

import pytest

from apps.executions.history import stats
from apps.executions.models import Execution, JobDayStats
from tests.conftest import utc

S = Execution.Status
NOW = utc(2026, 11, 29, 12, 0)

pytestmark = pytest.mark.django_db


def known_day(make_run, job, now=NOW):
    """25 finished runs in the last 24 hours, plus runs that must not count."""
    for i in range(20):  # durations 10..200 ms, lateness 0..1900 ms
        make_run(job, now - timedelta(minutes=10 * i), duration_ms=10 * (i + 1), late_ms=100 * i)
    kinds = ["timeout", "timeout", "http_status", ""]
    for i, kind in enumerate(kinds):  # durations 1000..4000 ms, 5 s late
        status = S.TIMED_OUT if kind == "timeout" else S.FAILED
        make_run(job, now - timedelta(hours=5, minutes=i), status=status, duration_ms=1000 * (i + 1),
                 late_ms=5000, error_kind=kind)
    make_run(job, now - timedelta(hours=24), status=S.SKIPPED)  # at the window's start: counts
    make_run(job, now - timedelta(hours=24, seconds=1), duration_ms=99_999)  # just before: not counted
    make_run(job, now + timedelta(minutes=1), duration_ms=99_999)  # after now: not counted
    make_run(job, now - timedelta(hours=1, seconds=30), status=S.QUEUED)  # unfinished: not counted


def test_24h_is_exact_on_known_data(make_job, make_run, tenant):
    job = make_job(tenant)
    known_day(make_run, job)
    result = stats.window_stats("24h", NOW, organization=tenant.organization, job=job)
    assert result["runs"] == 25
    assert (result["succeeded"], result["failed"], result["skipped"]) == (20, 4, 1)
    assert result["success_rate"] == 83.33  # 20 / 24
    assert result["failures_by_kind"] == {"timeout": 2, "http_status": 1, "unknown": 1}
    # 24 durations: 10, 20, ..., 200, 1000, 2000, 3000, 4000.
    # Nearest rank: p50 = 12th = 120; p95 = ceil(22.8) = 23rd = 3000; p99 = ceil(23.76) = 24th = 4000.
    assert result["duration_ms"] == {"p50": 120, "p95": 3000, "p99": 4000}
    # 24 lateness values: 0, 100, ..., 1900, 5000 x4. p50 = 12th = 1100; p95, p99 = 5000.
    assert result["lateness_ms"] == {"p50": 1100, "p95": 5000, "p99": 5000}
    assert result["percentiles"] == "exact"
    assert (result["start"], result["end"]) == (NOW - timedelta(hours=24), NOW)


def test_no_runs(make_job, tenant):
    result = stats.window_stats("30d", NOW, organization=tenant.organization, job=make_job(tenant))
    assert result["runs"] == 0 and result["success_rate"] is None
    assert result["duration_ms"] == {"p50": None, "p95": None, "p99": None}
    assert result["failures_by_kind"] == {}


def test_lateness_is_the_first_attempts(make_job, make_run, tenant):
    """A retried run's lateness is when its first attempt started, not its last."""
    from apps.executions.models import Attempt

    job = make_job(tenant)
    run = make_run(job, NOW - timedelta(hours=1), late_ms=300)
    Attempt.objects.create(execution=run, number=2, started_at=NOW - timedelta(minutes=30), request_method="GET",
                           request_url="https://example.com/hook", outcome="succeeded")
    result = stats.window_stats("24h", NOW, organization=tenant.organization, job=job)
    assert result["lateness_ms"]["p50"] == 300


def test_organization_wide_and_per_project(make_job, make_run, tenant, other_tenant):
    from apps.projects.models import Project

    second = Project.objects.create(organization=tenant.organization, name="Second", slug="second")
    a, b = make_job(tenant), make_job(tenant, project=second)
    make_run(a, NOW - timedelta(hours=1), duration_ms=100)
    make_run(b, NOW - timedelta(hours=2), duration_ms=300, status=S.FAILED, error_kind="connection")
    make_run(make_job(other_tenant), NOW - timedelta(hours=1), duration_ms=5)  # another tenant: never counted
    everything = stats.window_stats("24h", NOW, organization=tenant.organization)
    assert (everything["runs"], everything["succeeded"], everything["failed"]) == (2, 1, 1)
    assert everything["duration_ms"] == {"p50": 100, "p95": 300, "p99": 300}
    assert everything["failures_by_kind"] == {"connection": 1}
    only_second = stats.window_stats("24h", NOW, organization=tenant.organization, project_ids=[second.pk])
    assert (only_second["runs"], only_second["failed"]) == (1, 1)


def day_row(job, day, succeeded, failed, durations, lateness, skipped=0, error_kinds=None):
    return JobDayStats.objects.create(
        job=job, organization_id=job.organization_id, day=day, runs=succeeded + failed + skipped,
        succeeded=succeeded, failed=failed, skipped=skipped, error_kinds=error_kinds or {},
        duration_p50_ms=durations[0], duration_p95_ms=durations[1], duration_p99_ms=durations[2],
        lateness_p50_ms=lateness[0], lateness_p95_ms=lateness[1], lateness_p99_ms=lateness[2])


def test_whole_past_days_come_from_the_rollups_and_the_rest_from_runs(make_job, make_run, tenant):
    """7d ending 2026-11-29 12:00: 11-22 12:00..24:00 from runs, 11-23..11-27 (final days)
    from roll-ups, 11-28 and 11-29 (still changing) from runs."""
    job = make_job(tenant)
    day_row(job, date(2026, 11, 24), 8, 2, (100, 200, 300), (10, 20, 30), error_kinds={"timeout": 2})
    day_row(job, date(2026, 11, 26), 10, 0, (200, 300, 400), (20, 40, 60), skipped=1)
    # Rows the merge must ignore: a day only partly in the window and a day not final yet.
    day_row(job, date(2026, 11, 22), 50, 50, (9, 9, 9), (9, 9, 9))
    day_row(job, date(2026, 11, 28), 50, 50, (9, 9, 9), (9, 9, 9))
    # Raw runs of rolled-up days are not counted twice (nor would purged ones be missed).
    make_run(job, utc(2026, 11, 24, 6), duration_ms=99_999)
    # Raw runs outside the rolled-up days.
    make_run(job, utc(2026, 11, 22, 11, 59), duration_ms=99_999)  # before the window
    make_run(job, utc(2026, 11, 22, 13), duration_ms=400, late_ms=0)
    make_run(job, utc(2026, 11, 28, 13), duration_ms=600, late_ms=100, status=S.FAILED, error_kind="timeout")
    make_run(job, utc(2026, 11, 29, 11), duration_ms=500, late_ms=50)
    result = stats.window_stats("7d", NOW, organization=tenant.organization, job=job)
    assert (result["succeeded"], result["failed"], result["skipped"]) == (8 + 10 + 2, 2 + 1, 1)
    assert result["runs"] == 24
    assert result["failures_by_kind"] == {"timeout": 3}
    assert result["success_rate"] == round(100 * 20 / 23, 2)
    # Groups (weight = succeeded + failed): 11-24 (10), 11-26 (10), raw head 11-22 (1 run: 400),
    # raw tail 11-28..29 (2 runs: 600, 500 -> p50 500, p95 600, p99 600).
    # Run-weighted means: p50 = (100*10 + 200*10 + 400*1 + 500*2) / 23 = 4400 / 23 = 191.3
    assert result["duration_ms"] == {"p50": 191, "p95": round((2000 + 3000 + 400 + 1200) / 23),
                                     "p99": round((3000 + 4000 + 400 + 1200) / 23)}
    # lateness: head 0; tail 50, 100 -> p50 50, p95 100.
    assert result["lateness_ms"]["p50"] == round((100 + 200 + 0 + 100) / 23)
    assert result["percentiles"] == "approximate"


def test_without_rollups_the_whole_window_comes_from_runs(make_job, make_run, tenant):
    """Roll-ups not run yet (or a fresh install): nothing is missed, percentiles stay exact."""
    job = make_job(tenant)
    for day, duration in ((23, 100), (24, 200), (25, 300)):
        make_run(job, utc(2026, 11, day, 8), duration_ms=duration)
    result = stats.window_stats("7d", NOW, organization=tenant.organization, job=job)
    assert result["runs"] == 3
    assert result["duration_ms"] == {"p50": 200, "p95": 300, "p99": 300}
    assert result["percentiles"] == "exact"


def test_rolled_up_runs_still_count_after_the_purge(make_job, make_run, tenant):
    """With the billing roll-up (apps.executions.usage.rollups): the figures of a final day are the
    same before and after its runs are deleted."""
    from apps.executions.usage.rollups import roll_up

    job = make_job(tenant)
    for i in range(10):
        make_run(job, utc(2026, 11, 25, 10, i), duration_ms=100 * (i + 1), late_ms=10 * i,
                 status=S.FAILED if i >= 8 else S.SUCCEEDED, error_kind="timeout" if i == 9 else "")
    before = stats.window_stats("7d", NOW, organization=tenant.organization, job=job)
    roll_up(date(2026, 11, 25), organization=tenant.organization, now=NOW)
    Execution.objects.filter(job=job).delete()
    after = stats.window_stats("7d", NOW, organization=tenant.organization, job=job)
    for field in ("runs", "succeeded", "failed", "skipped", "success_rate", "failures_by_kind",
                  "duration_ms", "lateness_ms"):
        assert after[field] == before[field], field
    assert after["failures_by_kind"] == {"timeout": 1, "unknown": 1}
    assert (before["percentiles"], after["percentiles"]) == ("exact", "approximate")


def test_percentile_is_nearest_rank():
    assert stats.percentile([], 0.5) is None
    assert stats.percentile([7], 0.99) == 7
    assert stats.percentile(list(range(1, 101)), 0.95) == 95
    assert stats.percentile([1, 2, 3, 4], 0.5) == 2
    assert stats.percentile([10, 20, 30], 0.5) == 20  # rank ceil(1.5) = 2
    assert stats.percentile(list(range(1, 25)), 0.95) == 23  # rank ceil(22.8) = 23, as PERCENTILE_DISC


def test_the_python_path_agrees_with_postgresql(make_job, make_run, tenant):
    """Embedded mode (SQLite) computes the percentiles in Python: same figures."""
    job = make_job(tenant)
    known_day(make_run, job)
    rows = Execution.objects.filter(job=job, scheduled_for__gte=NOW - timedelta(hours=24),
                                    scheduled_for__lte=NOW, status__in=stats.FINISHED)
    counts = {"succeeded": stats.Count("pk", filter=stats.Q(status=S.SUCCEEDED)),
              "failed": stats.Count("pk", filter=stats.Q(status__in=stats.FAILED)),
              "skipped": stats.Count("pk", filter=stats.Q(status=S.SKIPPED))}
    assert stats._python_figures(rows, counts) == stats._pg_figures(rows, counts)
    assert stats._python_figures(rows, counts)["duration_ms"] == {"p50": 120, "p95": 3000, "p99": 4000}
