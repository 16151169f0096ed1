"""Publishing to the plan's queue on the real Redis broker.

Tests that run a loop tick use real transactions: the tick calls close_old_connections(),
which (rightly) drops a connection left inside a transaction.
"""

import pytest
from django.db import transaction

from apps.accounts.services import change_plan
from apps.executions.models import Execution
from apps.executions.routing import queue_for
from apps.executions.scheduling.process import SchedulerLoop
from apps.executions.scheduling.triggers import trigger_now
from apps.plans.models import Plan
from tests.conftest import utc

T0 = utc(2027, 3, 1, 12, 0)


@pytest.mark.django_db(transaction=True)
def test_tick_publishes_each_execution_once_to_the_plan_queue(tenant, make_job, private_queue, broker):
    jobs = [make_job(tenant, next_run_at=T0) for _ in range(30)]
    loop = SchedulerLoop(batch_size=100, sweep_interval=3600, clock=lambda: T0)
    loop.tick()
    ids = broker.published_ids(private_queue)
    created = set(str(i) for i in Execution.objects.filter(job__in=jobs).values_list("id", flat=True))
    assert sorted(ids) == sorted(created) and len(created) == 30


@pytest.mark.django_db(transaction=True)
def test_region_routes_to_the_regional_queue(settings, tenant, make_job, private_queue, broker):
    settings.REGIONS = ["eu", "us"]
    job = make_job(tenant, next_run_at=T0, region="eu")
    SchedulerLoop(batch_size=10, sweep_interval=3600, clock=lambda: T0).tick()
    execution = Execution.objects.get(job=job)
    assert execution.queue == f"{private_queue}.eu"
    assert broker.published_ids(f"{private_queue}.eu") == [str(execution.id)]
    broker.drop(f"{private_queue}.eu")


def test_unknown_region_falls_back_to_the_plan_queue(settings):
    settings.REGIONS = ["eu"]
    assert queue_for("runs.pro", "mars") == "runs.pro"
    assert queue_for("runs.pro", "eu") == "runs.pro.eu"


@pytest.mark.django_db(transaction=True)
def test_plan_change_moves_future_runs_to_the_new_queue(tenant, make_job, private_queue, broker):
    job = make_job(tenant, next_run_at=T0)
    business = Plan.objects.get(code="business")
    business.queue = private_queue + ".business"
    business.save()
    change_plan(tenant.organization, business)
    SchedulerLoop(batch_size=10, sweep_interval=3600, clock=lambda: T0).tick()
    assert Execution.objects.get(job=job).queue == business.queue
    assert len(broker.published_ids(business.queue)) == 1
    broker.drop(business.queue)


@pytest.mark.django_db(transaction=True)
def test_trigger_now_publishes_after_commit(tenant, make_job, private_queue, broker):
    job = make_job(tenant)
    with transaction.atomic():
        execution = trigger_now(job, now=T0)
        assert broker.published_ids(private_queue) == []  # not before the commit
    assert execution.trigger == Execution.Trigger.MANUAL and execution.status == "queued"
    assert broker.published_ids(private_queue) == [str(execution.id)]


def test_sweeper_republishes_unpublished_and_stale_runs_once(tenant, make_job, private_queue, broker):
    from datetime import timedelta

    from apps.executions.scheduling.sweeper import due_retries, stale

    job = make_job(tenant)
    org = tenant.organization
    lost = Execution.objects.create(job=job, organization=org, scheduled_for=T0, queue=private_queue,
                                    published_at=T0)
    retry_due = Execution.objects.create(job=job, organization=org, scheduled_for=T0 + timedelta(minutes=1),
                                         queue=private_queue, published_at=None,
                                         next_attempt_at=T0 + timedelta(seconds=30))
    retry_later = Execution.objects.create(job=job, organization=org, scheduled_for=T0 + timedelta(minutes=2),
                                           queue=private_queue, published_at=None,
                                           next_attempt_at=T0 + timedelta(hours=1))
    fresh = Execution.objects.create(job=job, organization=org, scheduled_for=T0 + timedelta(minutes=3),
                                     queue=private_queue, published_at=T0 + timedelta(seconds=50))
    now = T0 + timedelta(seconds=61)
    assert [r[0] for r in due_retries(now)] == [retry_due.id]
    assert [r[0] for r in stale(now, republish_after=60)] == [lost.id]
    rows = due_retries(now) + stale(now, republish_after=60)
    assert rows == []  # marked: a second sweeper finds nothing
    fresh.refresh_from_db()
    retry_later.refresh_from_db()
    assert fresh.published_at == T0 + timedelta(seconds=50) and retry_later.published_at is None


def test_sweeper_hands_back_runs_whose_worker_died(tenant, make_job):
    from datetime import timedelta

    from apps.executions.scheduling.sweeper import recover_expired_leases

    job = make_job(tenant)
    org = tenant.organization
    dead = Execution.objects.create(job=job, organization=org, scheduled_for=T0, status="running",
                                    lease_expires_at=T0 + timedelta(seconds=40))
    alive = Execution.objects.create(job=job, organization=org, scheduled_for=T0 + timedelta(minutes=1),
                                     status="running", lease_expires_at=T0 + timedelta(minutes=5))
    rows = recover_expired_leases(T0 + timedelta(minutes=1))
    assert [r[0] for r in rows] == [dead.id]
    dead.refresh_from_db(); alive.refresh_from_db()
    assert (dead.status, alive.status) == ("queued", "running")


def test_sweeper_republishes_sooner_from_a_queue_with_nothing_waiting(tenant, make_job, private_queue):
    from datetime import timedelta

    from apps.executions.scheduling.sweeper import stale

    job = make_job(tenant)
    org = tenant.organization
    idle = Execution.objects.create(job=job, organization=org, scheduled_for=T0, queue=private_queue,
                                    published_at=T0)
    busy = Execution.objects.create(job=job, organization=org, scheduled_for=T0 + timedelta(minutes=1),
                                    queue=private_queue + ".busy", published_at=T0)
    now = T0 + timedelta(seconds=15)
    assert stale(now, republish_after=60) == []
    rows = stale(now, republish_after=60, idle_queues=[private_queue], idle_after=10)
    assert [r[0] for r in rows] == [idle.id]
    busy.refresh_from_db()
    assert busy.published_at == T0  # behind a backlog it waits the long delay


@pytest.mark.django_db(transaction=True)
def test_loop_sweep_reads_the_broker_to_find_idle_queues(settings, tenant, make_job, private_queue, broker):
    """A run whose message was lost (committed and marked published, never sent: a scheduler
    killed in between) is sent again after SWEEPER_REPUBLISH_IDLE_AFTER when its queue is
    empty, but not while other messages wait in that queue."""
    from datetime import timedelta

    settings.SWEEPER_REPUBLISH_AFTER, settings.SWEEPER_REPUBLISH_IDLE_AFTER = 60, 10
    job = make_job(tenant)
    lost = Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=T0,
                                    queue=private_queue, published_at=T0)
    loop = SchedulerLoop(batch_size=10, sweep_interval=0, clock=lambda: T0 + timedelta(seconds=15))
    broker.client.rpush(private_queue, b"a message still in line")
    loop._maybe_sweep()
    lost.refresh_from_db()
    assert lost.published_at == T0
    broker.client.delete(private_queue)
    loop._maybe_sweep()
    assert broker.published_ids(private_queue) == [str(lost.id)]
