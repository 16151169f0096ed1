"""Cancel with real processes: a Celery worker, the scheduler (retries, sweeper) and a slow
local endpoint, on PostgreSQL and Redis."""

import pytest

from apps.executions import cancelling

from apps.executions.scheduling import publishing
from apps.executions.models import Execution
from apps.executions.scheduling.triggers import trigger_now
from tests.support.processes import start_scheduler, start_worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FAST = dict(OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", SWEEPER_INTERVAL=0.5, SWEEPER_REPUBLISH_AFTER=30,
            DELIVERY_LEASE_MARGIN=2)
BY = cancelling.cancelled_by()


def test_a_queued_run_cancelled_never_reaches_the_target(tmp_path, make_tenant, make_job, target, live_broker):
    tenant = make_tenant(plan="enterprise")
    queue = live_broker.private_queue(tenant)
    cancelled_job = make_job(tenant, url=target.url("/cancelled"))
    kept_job = make_job(tenant, url=target.url("/kept"))
    worker = start_worker(tmp_path, [queue], **FAST, **live_broker.env)
    try:
        cancelled = trigger_now(cancelled_job)  # published on commit (autocommit: at once)
        cancelling.cancel(cancelled, by=BY)
        # Published again after the cancel, then a run that must go: once the worker has
        # sent the second, it has handled both messages of the first.
        publishing.publish({queue: [cancelled.pk]})
        kept = trigger_now(kept_job)
        wait_for(lambda: Execution.objects.get(pk=kept.pk).status == "succeeded", timeout=40,
                 message="the run after it to succeed")
    finally:
        assert worker.stop() == 0, worker.output()[-3000:]
    assert target.requests_to("/cancelled") == []
    cancelled.refresh_from_db()
    assert (cancelled.status, cancelled.started_at, cancelled.attempts.count()) == ("cancelled", None, 0)


def test_a_running_run_cancelled_is_closed_and_not_retried(tmp_path, make_tenant, make_job, target, live_broker):
    tenant = make_tenant(plan="enterprise")
    queue = live_broker.private_queue(tenant)
    job = make_job(tenant, url=target.url("/hang?seconds=60"), timeout_seconds=90, max_attempts=3,
                   retry_initial_delay_seconds=1, retry_max_delay_seconds=1)
    scheduler = start_scheduler(tmp_path, **FAST, **live_broker.env)
    worker = start_worker(tmp_path, [queue], **FAST, **live_broker.env)
    try:
        execution = trigger_now(job)
        wait_for(lambda: target.requests_to("/hang"), timeout=40, message="the request to arrive")
        assert Execution.objects.get(pk=execution.pk).status == "running"
        cancelling.cancel(execution, by=BY)  # its commit raises the flag the worker's watch reads
        # Well before the endpoint's 60 s or the job's 90 s timeout: closed by the cancel.
        wait_for(lambda: target.hung_up_on("/hang"), timeout=20, message="the worker to close the request")
        wait_for(lambda: execution.attempts.exists(), timeout=20, message="the cancelled attempt to be recorded")
    finally:
        codes = scheduler.stop(), worker.stop()
    assert codes == (0, 0), worker.output()[-3000:]
    execution.refresh_from_db()
    assert execution.status == "cancelled" and execution.next_attempt_at is None
    assert list(execution.attempts.values_list("outcome", "error_kind")) == [("cancelled", "cancelled")]
    assert len(target.requests_to("/hang")) == 1
    job.refresh_from_db()
    assert job.consecutive_failures == 0
