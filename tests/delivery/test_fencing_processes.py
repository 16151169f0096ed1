"""Fenced leases with real processes (docs/architecture.md, "Fenced leases"): a worker
paused past its lease (SIGSTOP, as a VM pause or a stalled host) is superseded: another
worker sends the run again with the same webhook-id and finishes it, and what the paused
worker records when it resumes is kept as a superseded attempt and changes nothing; the
run is not sent again (issue 34 measured 41 extra requests in 290 s before)."""

import signal
import time

import pytest

from apps.executions.models import Execution
from apps.executions.scheduling.triggers import trigger_now
from tests.support.processes import start_scheduler, start_worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ENV = dict(OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", SWEEPER_INTERVAL=0.5, SWEEPER_REPUBLISH_AFTER=30,
           LEASE_SECONDS=3)


def test_a_worker_paused_past_its_lease_is_superseded_and_the_run_is_sent_twice_only(
        tmp_path, make_tenant, make_job, target, live_broker):
    tenant = make_tenant(plan="enterprise")
    queue = live_broker.private_queue(tenant)
    job = make_job(tenant, url=target.url("/slow?seconds=2"), timeout_seconds=60)
    scheduler = start_scheduler(tmp_path, **ENV, **live_broker.env)
    paused = start_worker(tmp_path, [queue], name="paused", concurrency=1, **ENV, **live_broker.env)
    try:
        execution = trigger_now(job)
        wait_for(lambda: target.requests_to("/slow"), timeout=40, message="the first request")
        paused.kill(signal.SIGSTOP)
        other = start_worker(tmp_path, [queue], name="other", concurrency=1, **ENV, **live_broker.env)
        try:
            wait_for(lambda: Execution.objects.get(id=execution.id).status == "succeeded", timeout=60,
                     message="the other worker to take the run over and finish it")
            paused.kill(signal.SIGCONT)
            wait_for(lambda: execution.attempts.filter(superseded_token__gt=0).exists(), timeout=40,
                     message="the paused worker's late result, kept as superseded")
            time.sleep(4)  # longer than a lease: nothing sends it again
        finally:
            other.stop()
    finally:
        paused.kill(signal.SIGCONT)
        codes = paused.stop(), scheduler.stop()
    assert codes == (0, 0), paused.output()[-3000:]
    requests = target.requests_to("/slow")
    assert len(requests) == 2, [r.headers.get("webhook-id") for r in requests]
    assert {r.headers["webhook-id"] for r in requests} == {str(execution.id)}
    execution.refresh_from_db()
    assert execution.status == "succeeded" and execution.lease_reclaims == 1
    own = list(execution.attempts.filter(superseded_token=0).values_list("number", "outcome"))
    assert own == [(1, "succeeded")]  # one outcome for attempt 1
    assert execution.attempts.filter(superseded_token__gt=0).count() == 1
