"""Losing the database session in the middle of a claim (PostgreSQL restarted, or the
session ended by idle_in_transaction_session_timeout while the scheduler was paused)
must make the scheduler back off and retry, not crash: under honcho one process exiting
stops them all. Found by the chaos soak (a scheduler resumed with SIGCONT after a
PostgreSQL restart exited with code 1)."""

from datetime import timedelta

import psycopg
import pytest
from django.db import connection
from django.utils import timezone

from apps.executions.scheduling import tick
from apps.executions.scheduling.process import SchedulerLoop
from apps.executions.models import Execution
from tests.support.broker import use_private_queue
from tests.support.processes import test_database_url as database_url

pytestmark = pytest.mark.django_db(transaction=True)


def test_scheduler_backs_off_when_its_session_dies_inside_a_claim(monkeypatch, make_tenant, make_job, broker):
    tenant = make_tenant(plan="enterprise")
    queue = use_private_queue(tenant)
    job = make_job(tenant, next_run_at=timezone.now())
    begin_claim = tick._begin_claim
    killed = []

    def begin_then_lose_the_session():
        begin_claim()
        if not killed:  # the server ends this session between two statements of the claim
            pid = connection.connection.info.backend_pid
            with psycopg.connect(database_url(), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", [pid])
            killed.append(pid)

    monkeypatch.setattr(tick, "_begin_claim", begin_then_lose_the_session)
    loop = SchedulerLoop(max_sleep=0.0, sweep_interval=3600)
    loop.run(max_ticks=2)  # the first tick loses its session; the second claims the job
    assert killed
    assert Execution.objects.filter(job=job).count() == 1
    assert broker.published_ids(queue) == [str(Execution.objects.get(job=job).id)]
    broker.drop(queue)


def test_scheduler_backs_off_when_its_session_dies_before_its_idle_sleep(monkeypatch, make_tenant, make_job):
    # Found by the chaos soak's proxy cutting every PostgreSQL connection: the query that
    # sizes the idle sleep (the next job due) ran outside the loop's guard, and a lost
    # session there ended the scheduler with code 1.
    make_job(make_tenant(plan="enterprise"), next_run_at=timezone.now() + timedelta(hours=1))
    idle_sleep = SchedulerLoop._idle_sleep
    killed = []

    def lose_the_session_then_size_the_sleep(loop):
        if not killed:  # the server ends this session just before the idle query
            pid = connection.connection.info.backend_pid
            with psycopg.connect(database_url(), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s, 5000)", [pid])  # returns once it is gone
            killed.append(pid)
        return idle_sleep(loop)

    monkeypatch.setattr(SchedulerLoop, "_idle_sleep", lose_the_session_then_size_the_sleep)
    loop = SchedulerLoop(max_sleep=0.0, sweep_interval=3600)
    loop.run(max_ticks=2)  # the first idle query loses its session; the loop backs off and goes on
    assert killed
    assert loop.state.failures == 0  # and the second tick went through
