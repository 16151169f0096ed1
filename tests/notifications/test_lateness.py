"""Lateness is measured from when a run was due (its occurrence plus the jitter applied to it
on purpose) to its first attempt's start; late alerts judge only runs scheduled after the
rule was set, and alert once per episode (a run started in time ends it)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions.models import Attempt, Execution
from apps.executions.scheduling.tick import claim_due
from apps.executions.history.stats import window_stats
from apps.jobs.scheduling import job_jitter
from apps.notifications.models import Notification
from apps.notifications.services import set_rule
from apps.notifications.watch import late_and_long

from .conftest import queued

pytestmark = pytest.mark.django_db


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


def scheduled_run(job, at, *, late_by, jitter=0, status="succeeded"):
    """A finished scheduled run due at ``at`` + ``jitter`` whose first attempt started
    ``late_by`` seconds after that."""
    started = at + timedelta(seconds=jitter + late_by)
    return queued(job, scheduled_for=at, jitter_seconds=jitter, started_at=started, finished_at=started,
                  status=status, trigger="schedule")


def test_the_scheduler_records_the_jitter_it_applies_to_each_run(tenant, make_job, now):
    # A job's stable offset is a hash of its id, zero for about one id in 40: take one whose offset is not.
    job = next(job for job in (make_job(tenant, schedule_type="interval", interval_seconds=60, jitter_seconds=40)
                               for _ in range(20)) if job_jitter(job) > timedelta(0))
    jitter = job_jitter(job)
    job.next_run_at = now - timedelta(minutes=1)
    job.save(update_fields=["next_run_at"])
    claim_due(now, 100)
    run = Execution.objects.get(job=job)
    assert run.jitter_seconds == int(jitter.total_seconds())


def test_jitter_is_not_lateness_for_the_late_alert(tenant, make_channel, make_job, now):
    make_channel(tenant)
    job = make_job(tenant, jitter_seconds=40)
    set_rule(tenant.project, job, {"late_after_seconds": 5}, now=now - timedelta(hours=1))
    for minutes in (30, 20, 10):  # 38 s of jitter, then 2 s of real lateness: in time each time
        scheduled_run(job, now - timedelta(minutes=minutes), jitter=38, late_by=2)
    assert late_and_long(now) == []
    late = scheduled_run(job, now - timedelta(minutes=5), jitter=38, late_by=9)
    (row,) = late_and_long(now)
    assert row.execution_id == late.id and "Started 9 s after it was due (limit 5 s)" in row.text


def test_a_new_late_rule_does_not_alert_about_past_runs(tenant, make_channel, make_job, now):
    make_channel(tenant)
    job = make_job(tenant)
    for minutes in range(5, 90, 5):  # 17 runs, each 2 minutes late, before the rule existed
        scheduled_run(job, now - timedelta(minutes=minutes), late_by=120)
    set_rule(tenant.project, job, {"late_after_seconds": 60}, now=now)
    assert late_and_long(now + timedelta(minutes=1)) == []
    after = scheduled_run(job, now + timedelta(minutes=1), late_by=120)
    assert [row.execution_id for row in late_and_long(now + timedelta(minutes=4))] == [after.id]


def test_one_late_alert_per_episode_not_per_run(tenant, make_channel, make_job, now):
    make_channel(tenant)
    job = make_job(tenant)
    set_rule(tenant.project, job, {"late_after_seconds": 10}, now=now - timedelta(hours=2))
    start = now - timedelta(hours=1)
    first = scheduled_run(job, start, late_by=30)
    scheduled_run(job, start + timedelta(minutes=1), late_by=40)
    assert [row.execution_id for row in late_and_long(now)] == [first.id]
    scheduled_run(job, start + timedelta(minutes=2), late_by=50)  # still late: the same episode
    assert late_and_long(now + timedelta(minutes=1)) == []
    scheduled_run(job, start + timedelta(minutes=3), late_by=1)  # in time: the episode ends
    again = scheduled_run(job, start + timedelta(minutes=4), late_by=30)  # a new episode
    assert [row.execution_id for row in late_and_long(now + timedelta(minutes=2))] == [again.id]
    assert Notification.objects.filter(event="late").count() == 2


def test_a_run_that_may_still_start_in_time_is_judged_later(tenant, make_channel, make_job, now):
    make_channel(tenant)
    job = make_job(tenant, jitter_seconds=60)
    set_rule(tenant.project, job, {"late_after_seconds": 30}, now=now - timedelta(hours=1))
    waiting = queued(job, scheduled_for=now - timedelta(seconds=50), jitter_seconds=45, trigger="schedule")
    assert late_and_long(now) == []  # due 5 s ago: not late yet
    (row,) = late_and_long(now + timedelta(seconds=40))
    assert row.execution_id == waiting.id and "Not started 45 s after it was due" in row.text


def test_lateness_statistics_leave_the_jitter_out(tenant, make_job, now):
    job = make_job(tenant, jitter_seconds=40)
    for minutes in (30, 20, 10):
        run = scheduled_run(job, now - timedelta(minutes=minutes), jitter=38, late_by=2)
        Attempt.objects.create(execution=run, number=1, started_at=run.started_at, finished_at=run.finished_at,
                               request_method="GET", request_url="https://example.com", outcome="succeeded")
    stats = window_stats("24h", now, organization=tenant.organization, job=job)
    assert stats["lateness_ms"] == {"p50": 2000, "p95": 2000, "p99": 2000}


def test_the_history_api_gives_each_runs_lateness_without_jitter(tenant, api, make_job, now):
    job = make_job(tenant, jitter_seconds=40)
    run = scheduled_run(job, now - timedelta(minutes=10), jitter=38, late_by=2.5)
    retried = scheduled_run(job, now - timedelta(minutes=5), jitter=38, late_by=1, status="failed")
    Attempt.objects.create(execution=retried, number=1, request_method="GET", request_url="https://example.com",
                           started_at=retried.started_at, outcome="failed")
    retried.attempt, retried.started_at = 2, retried.started_at + timedelta(minutes=1)  # the retry started later
    retried.save(update_fields=["attempt", "started_at"])
    not_started = queued(job, scheduled_for=now, trigger="schedule")
    listed = {row["id"]: row for row in api.get(f"/api/v1/jobs/{job.pk}/executions/").json()["results"]}
    assert listed[str(run.id)]["lateness_seconds"] == 2.5 and listed[str(run.id)]["jitter_seconds"] == 38
    assert listed[str(retried.id)]["lateness_seconds"] == 1.0  # measured at the first attempt
    assert listed[str(not_started.id)]["lateness_seconds"] is None
    detail = api.get(f"/api/v1/executions/{retried.id}/").json()
    assert detail["lateness_seconds"] == 1.0

