"""A busy worker keeps its leases (docs/architecture.md, "Fenced leases"): the heartbeat
is a thread of its own, so a delivery loop held up far past LEASE_SECONDS (a CPU-bound
stretch of Python on it, a burst's many results to parse) renews every lease it holds,
and the sweeper takes nothing back. A heartbeat that renewed from the delivery loop, or
behind the recording, would let the runs' leases lapse and the customer's endpoint get
each run twice (a 2-scheduler burst once showed 249 such runs)."""

import threading
import time

import pytest
from django.db import connection

from apps.executions.models import Execution
from apps.executions.scheduling import sweeper
from apps.executions.worker import leases
from apps.executions.worker.batch import run_batch
from apps.executions.worker.outbound import delivery_loop
from tests.delivery.test_fencing import queued

pytestmark = [pytest.mark.usefixtures("allow_loopback"), pytest.mark.django_db(transaction=True)]

LEASE = 2.0  # the heartbeat renews every third of it: a margin for a loaded CI machine


def _spin_until(released, longest):
    # Python bytecode the whole time (not a sleep, which would give the interpreter away)
    end = time.monotonic() + longest
    while not released.is_set() and time.monotonic() < end:
        sum(range(200))


@pytest.fixture
def short_heartbeat(settings, monkeypatch):
    settings.LEASE_SECONDS = LEASE
    settings.DELIVERY_HANDOFF_SECONDS = 60
    monkeypatch.setattr(leases, "_heartbeat", {"pid": None, "heartbeat": None})
    yield
    leases.heartbeat().release(list(leases.heartbeat().held))


def _running(executions):
    return Execution.objects.filter(id__in=[e.id for e in executions], status="running").count()


def test_a_delivery_loop_busy_past_the_lease_loses_no_lease(short_heartbeat, tenant, make_job, target):
    job = make_job(tenant, url=target.url("/ok"))
    executions = [queued(tenant, job) for _ in range(5)]
    holding, released = threading.Event(), threading.Event()

    def hold_the_loop():
        holding.set()
        _spin_until(released, longest=60)

    def work():
        try:
            run_batch([e.id for e in executions])
        finally:
            connection.close()  # this thread's own

    delivery_loop().loop.call_soon_threadsafe(hold_the_loop)
    assert holding.wait(10)
    worker = threading.Thread(target=work)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while _running(executions) < len(executions) and time.monotonic() < deadline:
            time.sleep(0.05)
        claimed = _running(executions)
        time.sleep(2.5 * LEASE)  # every claimed lease would have run out twice over by now
        still_running = _running(executions)  # the loop is still held: nothing was sent
        taken_back = sweeper.recover_expired_leases()
    finally:
        released.set()
        worker.join(60)
    assert claimed == still_running == len(executions)
    assert taken_back == []
    for execution in executions:
        execution.refresh_from_db()
        assert execution.status == "succeeded" and execution.lease_reclaims == 0
        assert list(execution.attempts.values_list("superseded_token", flat=True)) == [0]
    assert len(target.requests_to("/ok")) == len(executions)  # each sent once
