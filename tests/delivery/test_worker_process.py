"""Real processes: scheduler + Celery worker + a local endpoint, on PostgreSQL and Redis (and
RabbitMQ for the tests marked ``ON_BOTH``; PgBouncer in transaction pooling mode in front of
PostgreSQL too for those marked ``ON_BOTH_AND_PGBOUNCER``)."""

import os
import signal
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions.scheduling import publishing
from apps.executions.models import Execution
from apps.executions.scheduling.triggers import trigger_now
from tests.support.processes import start_procfile_process, start_scheduler, start_worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FAST = dict(OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", SWEEPER_INTERVAL=0.5, SWEEPER_REPUBLISH_AFTER=30,
            DELIVERY_LEASE_MARGIN=2)
#: Run on RabbitMQ as well as on Redis.
ON_BOTH = pytest.mark.parametrize("live_broker", ["redis", "rabbitmq"], indirect=True)
#: On Redis directly, on RabbitMQ, and on Redis with the processes' PostgreSQL behind PgBouncer
#: in transaction pooling mode (docs/operations.md, "Behind PgBouncer").
ON_BOTH_AND_PGBOUNCER = pytest.mark.parametrize(
    ("live_broker", "live_database"), [("redis", "direct"), ("rabbitmq", "direct"), ("redis", "pgbouncer")],
    indirect=True)


@ON_BOTH_AND_PGBOUNCER
def test_a_due_job_is_fired_end_to_end(tmp_path, make_tenant, make_job, target, live_broker,
                                       live_database):
    tenant = make_tenant(plan="enterprise")
    queue = live_broker.private_queue(tenant)
    # Due now, and next due next year: a second request while the processes stop can only be
    # the same run delivered twice, never the schedule's next occurrence (every 5 minutes by
    # default, which a slow run could reach).
    job = make_job(tenant, url=target.url("/e2e"), next_run_at=timezone.now(), cron_expression="0 0 1 1 *")
    scheduler = start_scheduler(tmp_path, **FAST, **live_broker.env, **live_database.env)
    worker = start_worker(tmp_path, [queue], **FAST, **live_broker.env, **live_database.env)
    try:
        wait_for(lambda: Execution.objects.filter(job=job, status="succeeded").exists(), timeout=40,
                 message="the run to succeed")
    finally:
        codes = scheduler.stop(), worker.stop()
    assert codes == (0, 0), worker.output()[-3000:]
    (received,) = target.requests_to("/e2e")
    # One run, and nothing else for the job but a skip the misfire policy may record.
    execution = Execution.objects.get(job=job, status="succeeded")
    others = Execution.objects.filter(job=job).exclude(pk=execution.pk)
    assert set(others.values_list("status", "skip_reason")) <= {("skipped", "misfire_coalesced")}
    assert received.headers["webhook-id"] == str(execution.id)
    assert execution.started_at - execution.scheduled_for < timedelta(seconds=30)


@ON_BOTH_AND_PGBOUNCER
def test_worker_killed_mid_request_completes_the_run_once(tmp_path, make_tenant, make_job, target, live_broker,
                                                          live_database):
    tenant = make_tenant(plan="enterprise")
    queue = live_broker.private_queue(tenant)
    job = make_job(tenant, url=target.url("/slow?seconds=3"), timeout_seconds=5)
    scheduler = start_scheduler(tmp_path, **FAST, **live_broker.env, **live_database.env)
    doomed = start_worker(tmp_path, [queue], name="doomed", **FAST, **live_broker.env, **live_database.env)
    try:
        execution = trigger_now(job)
        wait_for(lambda: target.requests_to("/slow"), timeout=30, message="the request to arrive")
        doomed.kill(signal.SIGKILL)
        doomed.stop()
        assert Execution.objects.get(id=execution.id).status == "running"
        survivor = start_worker(tmp_path, [queue], name="survivor", **FAST, **live_broker.env, **live_database.env)
        try:
            wait_for(lambda: Execution.objects.get(id=execution.id).status == "succeeded", timeout=60,
                     message="the run to be recovered and succeed")
        finally:
            survivor.stop()
    finally:
        scheduler.stop()
    execution.refresh_from_db()
    assert execution.attempts.filter(outcome="succeeded").count() == 1
    ids = {r.headers["webhook-id"] for r in target.requests_to("/slow")}
    assert ids == {str(execution.id)}  # the same idempotency id on the repeat
    assert len(target.requests_to("/slow")) == 2  # at least once as a request: once cut off, once whole


@ON_BOTH_AND_PGBOUNCER
def test_duplicate_messages_run_once_on_a_real_worker(tmp_path, make_tenant, make_job, target, live_broker,
                                                      live_database):
    tenant = make_tenant(plan="enterprise")
    queue = live_broker.private_queue(tenant)
    job = make_job(tenant, url=target.url("/dup"))
    executions = [Execution.objects.create(job=job, organization=tenant.organization, queue=queue,
                                           scheduled_for=timezone.now() - timedelta(seconds=i + 1)) for i in range(10)]
    ids = [e.id for e in executions]
    for _ in range(3):
        publishing.publish({queue: ids})
    worker = start_worker(tmp_path, [queue], **FAST, **live_broker.env, **live_database.env)
    try:
        wait_for(lambda: Execution.objects.filter(id__in=ids, status="succeeded").count() == 10, timeout=40,
                 message="all runs")
    finally:
        worker.stop()
    assert len(target.requests_to("/dup")) == 10


@ON_BOTH
def test_worker_stops_cleanly_on_sigterm(tmp_path, make_tenant, live_broker):
    tenant = make_tenant()
    worker = start_worker(tmp_path, [live_broker.private_queue(tenant)], **FAST, **live_broker.env)
    worker.wait_ready()
    os.killpg(worker.popen.pid, signal.SIGTERM)
    assert worker.popen.wait(30) == 0
    worker.stop()


@ON_BOTH
def test_two_copies_of_a_procfile_worker_run_side_by_side(tmp_path, live_broker):
    """``honcho start -c worker_pro=2`` (docs/deploy.md): on RabbitMQ a Celery node's control
    queue is exclusive, so two copies under one node name crashed the second at start."""
    copies = [start_procfile_process(tmp_path, "worker_pro", log_name=f"pro{n}", WORKER_CONCURRENCY=1,
                                     **live_broker.env) for n in (1, 2)]
    try:
        for copy in copies:
            copy.wait_ready()
        time.sleep(1)
        assert [copy.popen.poll() for copy in copies] == [None, None], copies[1].output()[-3000:]
    finally:
        codes = [copy.stop() for copy in copies]
    assert codes == [0, 0]


@ON_BOTH_AND_PGBOUNCER
def test_a_failed_attempt_is_retried_through_the_database(tmp_path, make_tenant, make_job, target, live_broker,
                                                          live_database):
    tenant = make_tenant(plan="enterprise")
    queue = live_broker.private_queue(tenant)
    job = make_job(tenant, url=target.url("/flaky?fail=1&key=retry"), max_attempts=3,
                   retry_initial_delay_seconds=1, retry_max_delay_seconds=1)
    scheduler = start_scheduler(tmp_path, **FAST, **live_broker.env, **live_database.env)
    worker = start_worker(tmp_path, [queue], **FAST, **live_broker.env, **live_database.env)
    try:
        execution = trigger_now(job)
        wait_for(lambda: Execution.objects.get(id=execution.id).status == "succeeded", timeout=40,
                 message="the retry to succeed")
    finally:
        scheduler.stop()
        worker.stop()
    execution.refresh_from_db()
    assert execution.attempt == 2
    assert list(execution.attempts.order_by("number").values_list("outcome", "response_status")) == [
        ("failed", 503), ("succeeded", 200)]
    assert [r.headers["webhook-id"] for r in target.requests_to("/flaky")] == [str(execution.id)] * 2


@pytest.mark.parametrize(("handoff", "live_broker"), [(30.0, "redis"), (0.5, "redis"), (30.0, "rabbitmq")],
                         ids=["task-waiting", "late-recorder", "task-waiting-rabbitmq"], indirect=["live_broker"])
def test_sigterm_mid_request_finishes_and_records_the_run(tmp_path, make_tenant, make_job, target, handoff,
                                                          live_broker):
    """Warm shutdown with the Procfile's pool (prefork: SIGTERM reaches every process of the
    group, the pool's children too): a request in flight is finished and recorded once, both
    while its task still waits for it and after the task handed it to the child's late
    recorder (DELIVERY_HANDOFF_SECONDS), and the worker exits 0."""
    tenant = make_tenant(plan="enterprise")
    queue = live_broker.private_queue(tenant)
    job = make_job(tenant, url=target.url("/slow?seconds=3"), timeout_seconds=10)
    worker = start_worker(tmp_path, [queue], name="terminated", DELIVERY_HANDOFF_SECONDS=handoff, **FAST,
                          **live_broker.env)
    try:
        worker.wait_ready()
        execution = trigger_now(job)
        wait_for(lambda: target.requests_to("/slow"), timeout=30, message="the request to arrive")
        if handoff < 1:
            time.sleep(1.0)  # the task has returned (its message acknowledged): only the late recorder holds the run
        os.killpg(worker.popen.pid, signal.SIGTERM)
        code = worker.popen.wait(30)
    finally:
        worker.stop()
    assert code == 0, worker.output()[-3000:]
    execution.refresh_from_db()
    assert execution.status == "succeeded", worker.output()[-3000:]
    assert execution.attempts.count() == 1
    assert len(target.requests_to("/slow")) == 1
