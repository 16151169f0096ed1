"""The retention purge: runs past the plan's retention go (attempts with them) in bounded
batches; roll-ups are made first and stay; younger runs and other tenants' stay."""

from datetime import date, timedelta

from apps.billing.retention import purge_expired
from apps.executions.models import Attempt, Execution, JobDayStats, UsageDay
from tests.conftest import utc

NOW = utc(2030, 6, 30, 12, 0)
S = Execution.Status


def run_at(job, when, status=S.SUCCEEDED, **fields):
    execution = Execution.objects.create(job=job, organization=job.organization, scheduled_for=when, status=status,
                                         duration_ms=10, **fields)
    Attempt.objects.create(execution=execution, number=1, request_method="GET", request_url=job.url,
                           started_at=when, outcome="succeeded")
    return execution


def test_purge_deletes_expired_runs_in_batches_and_keeps_roll_ups(make_tenant, make_job):
    free = make_tenant(plan="free")  # 7 days
    job = make_job(free)
    old = [run_at(job, NOW - timedelta(days=10, minutes=i)) for i in range(7)]
    old.append(run_at(job, NOW - timedelta(days=9), S.FAILED, error_kind="timeout"))
    young = run_at(job, NOW - timedelta(days=6))
    UsageDay.objects.create(organization=free.organization, day=date(2030, 6, 20), runs=7)

    report = purge_expired(now=NOW, batch_size=3)
    assert report.executions == 8 and report.batches == 3
    assert list(Execution.objects.filter(job=job)) == [young]
    assert not Attempt.objects.filter(execution_id__in=[e.id for e in old]).exists()
    stats = {s.day: s for s in JobDayStats.objects.filter(job=job)}
    assert stats[date(2030, 6, 20)].runs == 7 and stats[date(2030, 6, 21)].failed == 1
    assert UsageDay.objects.get(organization=free.organization).runs == 7  # counters are never purged


def test_retention_follows_each_plan(make_tenant, make_job):
    free, pro = make_tenant(plan="free"), make_tenant(plan="pro")  # 7 and 30 days
    free_run = run_at(make_job(free), NOW - timedelta(days=8))
    pro_run = run_at(make_job(pro), NOW - timedelta(days=8))
    purge_expired(now=NOW)
    assert not Execution.objects.filter(pk=free_run.pk).exists()
    assert Execution.objects.filter(pk=pro_run.pk).exists()


def test_purge_keeps_unfinished_runs_and_unlinks_replays(make_tenant, make_job):
    free = make_tenant(plan="free")
    job = make_job(free)
    waiting = run_at(job, NOW - timedelta(days=20), S.QUEUED)
    original = run_at(job, NOW - timedelta(days=20, minutes=1))
    replay = run_at(job, NOW - timedelta(days=1), trigger=Execution.Trigger.REPLAY, replay_of=original)
    purge_expired(now=NOW)
    assert Execution.objects.filter(pk=waiting.pk).exists()
    assert not Execution.objects.filter(pk=original.pk).exists()
    assert Execution.objects.get(pk=replay.pk).replay_of_id is None


def test_existing_roll_ups_are_not_recomputed_from_a_partial_day(make_tenant, make_job):
    free = make_tenant(plan="free")
    job = make_job(free)
    run_at(job, NOW - timedelta(days=12))
    JobDayStats.objects.create(job=job, organization=free.organization, day=(NOW - timedelta(days=12)).date(), runs=40)
    report = purge_expired(now=NOW)
    assert report.rolled_up_days == 0
    assert JobDayStats.objects.get(job=job).runs == 40
