"""One clock (docs/architecture.md): the database's time decides what is due; a process's
own clock (skewed here by patching it) only paces the loop and is reported.

The catch-up tests pass time in (no clock at all): a job that missed more occurrences than
a tick records has every one of them recorded, a slice a tick."""

import logging
import time as time_module
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions import hooks
from apps.executions.scheduling.process import SchedulerLoop
from apps.executions.models import Execution
from apps.executions.scheduling.tick import MAX_DUE_SCAN, claim_due
from apps.jobs.models import Job
from apps.observability import clock as skew_report
from apps.observability.metrics import LOOP_ERRORS
from apps.sql import clock
from cronsvc.misfire import plan_catch_up
from tests.conftest import utc

T0 = utc(2027, 3, 1, 12, 0)
AHEAD = 30.0


@pytest.fixture
def process_clock_ahead(monkeypatch):
    """This process's wall clock AHEAD seconds ahead of the database's (and so of the
    real one): what libfaketime does to a whole process (tests/scheduler/test_faketime.py)."""
    real_time, real_now = time_module.time, timezone.now
    monkeypatch.setattr(time_module, "time", lambda: real_time() + AHEAD)
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(seconds=AHEAD))


def test_reading_measures_the_skew_of_this_process(process_clock_ahead, db):
    reading = clock.reading()
    assert AHEAD - 1 < reading.skew_seconds < AHEAD + 1
    assert abs((timezone.now() - timedelta(seconds=AHEAD)) - reading.at) < timedelta(seconds=1)


@pytest.mark.django_db(transaction=True)
def test_a_scheduler_whose_clock_is_ahead_fires_nothing_early(process_clock_ahead, tenant, make_job, private_queue):
    due_in_20s = clock.database_now() + timedelta(seconds=20)
    job = make_job(tenant, next_run_at=due_in_20s, cron_expression="* * * * *")
    loop = SchedulerLoop(batch_size=10, sweep_interval=3600)
    loop.tick()
    assert not Execution.objects.filter(job=job).exists()
    job.refresh_from_db()
    assert job.next_run_at == due_in_20s
    assert AHEAD - 1 < loop.reading.skew_seconds < AHEAD + 1


@pytest.mark.django_db(transaction=True)
def test_a_late_run_is_judged_at_the_database_time(process_clock_ahead, tenant, make_job, private_queue):
    """Due 5 s ago by the database, 35 s ago by the process: with ``skip`` and a 10 s on-time
    window it runs (on time), it is not recorded as a misfire."""
    settings_due = clock.database_now() - timedelta(seconds=5)
    job = make_job(tenant, next_run_at=settings_due, interval_seconds=3600, schedule_type="interval",
                   cron_expression="", start_at=settings_due, misfire_policy="skip")
    from django.conf import settings
    original, settings.MISFIRE_ON_TIME_SECONDS = settings.MISFIRE_ON_TIME_SECONDS, 10
    try:
        SchedulerLoop(batch_size=10, sweep_interval=3600).tick()
    finally:
        settings.MISFIRE_ON_TIME_SECONDS = original
    assert list(Execution.objects.filter(job=job).values_list("status", "skip_reason")) == [("queued", "")]


@pytest.mark.django_db(transaction=True)
def test_the_skew_is_reported_in_a_log_warning_the_gauge_and_the_heartbeat(process_clock_ahead, settings, tenant,
                                                                            caplog):
    from apps.observability.models import Heartbeat

    settings.CLOCK_SKEW_WARN_SECONDS = 2.0
    skew_report._warned_at.clear()
    with caplog.at_level(logging.WARNING, logger="cronsvc.clock"):
        SchedulerLoop(batch_size=10, sweep_interval=3600).tick()
    assert any("clock skew" in r.getMessage() and "scheduler" in r.getMessage() for r in caplog.records)
    gauge = skew_report.CLOCK_SKEW.labels("scheduler")._value.get()
    assert AHEAD - 1 < gauge < AHEAD + 1
    beat = Heartbeat.objects.get(kind="scheduler")
    assert AHEAD - 1 < beat.clock_skew_seconds < AHEAD + 1
    assert abs(beat.last_seen - clock.database_now()) < timedelta(seconds=5)  # the database's time


def test_readyz_warns_about_a_skewed_web_process_and_a_skewed_scheduler(process_clock_ahead, client, settings, db,
                                                                      metrics_open):
    from apps.observability.heartbeats import Beat

    settings.CLOCK_SKEW_WARN_SECONDS = 2.0
    Beat("scheduler", name="s1").beat(force=True)  # measures its own skew: AHEAD
    response = client.get("/readyz")
    assert response.status_code == 200  # a warning, not a failure: the database's clock rules
    body = response.json()
    assert body["clock"]["skewed"] is True and AHEAD - 1 < body["clock"]["skew_seconds"] < AHEAD + 1
    (scheduler,) = body["processes"]["schedulers"]
    assert scheduler["clock_skewed"] is True
    skews = [w for w in body["warnings"] if w.startswith("clock_skew:")]  # settings' warnings aside
    assert len(skews) == 2 and "scheduler s1" in skews[1]


def test_readyz_has_no_warning_with_clocks_in_step(client, db, metrics_open):  # details: /metrics' callers
    body = client.get("/readyz").json()
    assert not [w for w in body["warnings"] if w.startswith("clock_skew:")] and body["clock"]["skewed"] is False


# --- a tick's other parts never stop scheduling


@pytest.mark.django_db(transaction=True)
def test_a_failing_tick_hook_is_logged_and_counted_and_scheduling_goes_on(tenant, make_job, private_queue, caplog):
    calls = []

    def broken_hook(now):
        calls.append(now)
        raise RuntimeError("monitors broke")

    hooks.on_tick(broken_hook)
    before = LOOP_ERRORS.labels(f"hook:{__name__}")._value.get()
    try:
        loop = SchedulerLoop(batch_size=10, sweep_interval=0, clock=lambda: T0)
        make_job(tenant, next_run_at=T0)
        with caplog.at_level(logging.ERROR, logger="cronsvc.scheduler"):
            loop.tick()
            make_job(tenant, next_run_at=T0)
            loop.tick()
    finally:
        hooks._tick_hooks.remove(broken_hook)
    assert calls == [T0, T0]
    assert Execution.objects.filter(scheduled_for=T0).count() == 2  # both ticks scheduled
    assert LOOP_ERRORS.labels(f"hook:{__name__}")._value.get() == before + 2
    assert sum("monitors broke" in r.getMessage() for r in caplog.records) == 2


@pytest.mark.django_db(transaction=True)
def test_a_failing_relay_is_logged_and_counted_and_the_sweep_still_runs(tenant, make_job, private_queue,
                                                                       monkeypatch):
    from apps.eventstream import relay

    def broken_relay(batch):
        raise ValueError("not JSON")

    monkeypatch.setattr(relay, "relay_round", broken_relay)
    before = LOOP_ERRORS.labels("relay")._value.get()
    loop = SchedulerLoop(batch_size=10, sweep_interval=0, clock=lambda: T0)
    job = make_job(tenant, next_run_at=T0)
    loop.tick()
    assert Execution.objects.filter(job=job).count() == 1
    assert LOOP_ERRORS.labels("relay")._value.get() == before + 1
    assert loop.state.last_sweep > 0  # the sweep after the relay ran


# --- catch-up: every occurrence recorded, a slice a tick (time passed in)


def test_a_long_outage_is_recorded_occurrence_by_occurrence(tenant, make_job):
    missed = 2 * MAX_DUE_SCAN + 50
    job = make_job(tenant, cron_expression="* * * * *", misfire_policy="run_once", misfire_grace_seconds=600)
    job.next_run_at = T0
    job.save(update_fields=["next_run_at"])
    now = T0 + timedelta(minutes=missed, seconds=5)
    ticks = 0
    while Job.objects.filter(id=job.id, due__next_run_at__lte=now).exists():
        claim_due(now, batch_size=10)
        ticks += 1
        assert ticks < 10
    rows = list(Execution.objects.filter(job=job).order_by("scheduled_for")
                .values_list("scheduled_for", "status", "skip_reason"))
    assert [at for at, _, _ in rows] == [T0 + timedelta(minutes=m) for m in range(missed + 1)]
    assert ticks == 3
    *older, latest = rows
    assert latest == (T0 + timedelta(minutes=missed), "queued", "")
    grace_start = now - timedelta(seconds=600)
    assert all(status == "skipped" for _, status, _ in older)
    assert {reason for at, _, reason in older if at < grace_start} == {"misfire_expired"}
    assert {reason for at, _, reason in older if at >= grace_start} == {"misfire_coalesced"}
    job.refresh_from_db()
    assert job.next_run_at == T0 + timedelta(minutes=missed + 1)


def test_catch_up_slices_keep_the_policies():
    due = [T0 + timedelta(minutes=m) for m in range(5)]
    now = T0 + timedelta(minutes=10)
    for policy, reason in (("run_once", "misfire_coalesced"), ("skip", "misfire_skipped")):
        plan = plan_catch_up(due, now=now, policy=policy, grace_seconds=3600, more=True)
        assert plan.run == [] and plan.skip == [(at, reason) for at in due]
    plan = plan_catch_up(due, now=now, policy="run_all", grace_seconds=3600, cap=3, more=True)
    assert plan.run == due[:3] and plan.skip == [(at, "misfire_cap") for at in due[3:]]
    plan = plan_catch_up(due, now=now, policy="run_once", grace_seconds=420, more=True)
    assert plan.skip == [(at, "misfire_expired") for at in due[:3]] + [(at, "misfire_coalesced") for at in due[3:]]


def test_a_web_process_whose_clock_runs_ahead_places_no_first_run_late_and_fires_nothing_early(
        api, tenant, monkeypatch):
    """Creating, resuming and triggering a job take the database's time: a web process one
    hour ahead neither skips the next hour's runs nor queues a manual run in the future."""
    from datetime import timedelta

    from django.utils import timezone

    from apps.executions.models import Execution
    from apps.jobs.models import Job
    from apps.sql.clock import database_now
    from tests.api.conftest import job_body

    real_now = timezone.now
    monkeypatch.setattr(timezone, "now", lambda: real_now() + timedelta(hours=1))
    body = job_body(tenant, schedule={"type": "interval", "seconds": 60})
    created = api.post("/api/v1/jobs/", body, format="json")
    assert created.status_code == 201, created.content
    job = Job.objects.get(pk=created.json()["id"])
    db_now = database_now()
    assert db_now < job.next_run_at <= db_now + timedelta(seconds=61)

    assert api.post(f"/api/v1/jobs/{job.pk}/pause/").status_code == 200
    assert api.post(f"/api/v1/jobs/{job.pk}/resume/").status_code == 200
    job.refresh_from_db()
    assert job.next_run_at <= database_now() + timedelta(seconds=61)

    assert api.post(f"/api/v1/jobs/{job.pk}/trigger/").status_code in (200, 201, 202)
    manual = Execution.objects.get(job=job, trigger="manual")
    assert manual.scheduled_for <= database_now()  # due at once by the clock the worker's claim reads
