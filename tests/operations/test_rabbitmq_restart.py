"""RabbitMQ restarts lose no run and double none, on a private node (soak/services.py:
PrivateRabbitMQ; the machine's shared server is never restarted).

A crash (SIGKILL) keeps what RabbitMQ confirmed: Celery's queues are durable and its
messages persistent. A node that comes back empty (replaced, or its disk lost) keeps
nothing: then the sweeper finds the queue empty and publishes the runs again. Either way
every run is requested once and recorded once: the worker's claim turns a message that
comes back for a run already taken into a no-op."""

import logging
import uuid
from collections import Counter
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions.scheduling import publishing
from apps.executions.scheduling.broker_queues import AmqpInspector
from apps.executions.models import Execution
from soak.services import PrivateRabbitMQ
from tests.support.broker import AmqpBroker, publishing_to, queued_runs, use_private_queue
from tests.support.processes import start_scheduler, start_worker, wait_for
from tests.support.target import start_target

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: A task holds its message (unacknowledged) until its request is done: no hand-off to the
#: late recorder within the test, so a worker of two processes takes two messages at a time.
ENV = dict(OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", SWEEPER_INTERVAL=0.5, SWEEPER_REPUBLISH_IDLE_AFTER=2,
           SWEEPER_REPUBLISH_AFTER=300, DELIVERY_LEASE_MARGIN=2, DELIVERY_HANDOFF_SECONDS=30)
RUNS = 8


@pytest.fixture(scope="module")
def rabbitmq(tmp_path_factory):
    """One node for the module's tests in each test process that runs some (7 s to start)."""
    node = PrivateRabbitMQ(tmp_path_factory.mktemp("rabbitmq"))
    node.start()
    yield node
    node.remove()


@pytest.fixture
def runs(make_tenant, make_job):
    """RUNS queued runs of a job whose request takes two seconds, and its target."""
    tenant = make_tenant(plan="enterprise")
    queue = use_private_queue(tenant)
    target = start_target()
    job = make_job(tenant, url=target.url("/slow?seconds=2"), timeout_seconds=20)
    yield queue, queued_runs(job, queue, RUNS), target
    target.close()


@pytest.mark.parametrize("wipe", [False, True], ids=["crash", "comes-back-empty"])
def test_every_run_completes_once_across_a_rabbitmq_restart(tmp_path, rabbitmq, runs, wipe):
    queue, ids, target = runs
    env = dict(ENV, CELERY_BROKER_URL=rabbitmq.url)
    worker = start_worker(tmp_path, [queue], concurrency=2, **env)
    scheduler = None
    try:
        worker.wait_ready()
        Execution.objects.filter(id__in=ids).update(published_at=timezone.now())  # as the scheduler marks them
        with publishing_to(rabbitmq.url):
            sent = sum(publishing.publish({queue: [run]}) for run in ids)  # a message each
        assert sent == RUNS
        wait_for(lambda: Execution.objects.filter(id__in=ids, status="running").count() == 2, timeout=30,
                 message="two runs in flight, the rest waiting in the queue")
        scheduler = start_scheduler(tmp_path, **env)  # its sweeper repairs what the broker lost
        assert len(waiting_ids(rabbitmq, queue)) == RUNS - 2
        # A queue nobody consumes shows what the restart kept (the worker's own queue races
        # with its reconnection).
        idle, kept = f"{queue}.idle", [str(uuid.uuid4()) for _ in range(3)]
        with publishing_to(rabbitmq.url):
            assert publishing.publish({idle: kept}) == 3  # one message
        inspector = AmqpInspector(rabbitmq.url, timeout=2.0)
        assert inspector.message_counts([idle]) == {idle: 1}
        rabbitmq.restart(wipe=wipe)
        # The inspector's kept connection died with the node: the next question gets a new
        # one, not an error; a crash kept what RabbitMQ had confirmed.
        assert inspector.message_counts([idle]) == {idle: 0 if wipe else 1}
        assert sorted(waiting_ids(rabbitmq, idle)) == ([] if wipe else sorted(kept))
        wait_for(lambda: Execution.objects.filter(id__in=ids, status="succeeded").count() == RUNS, timeout=90,
                 message="every run to finish")
        assert worker.popen.poll() is None, worker.output()[-3000:]
    finally:
        codes = worker.stop(), scheduler.stop() if scheduler else None
    assert codes == (0, 0), worker.output()[-3000:] + scheduler.output()[-3000:]
    assert [e.attempt for e in Execution.objects.filter(id__in=ids)] == [1] * RUNS
    requests = Counter(r.headers["webhook-id"] for r in target.requests_to("/slow"))
    assert requests == Counter({str(run): 1 for run in ids})


def test_a_publish_rabbitmq_refuses_counts_as_failed(rabbitmq, tenant, make_job, caplog):
    """Publisher confirms: a message the broker refuses (here its queue is full and set to
    reject new messages) raises instead of vanishing, so the ids it carried are reported
    unpublished and left to the sweeper. Without confirms every id would count as sent."""
    queue = use_private_queue(tenant)
    job = make_job(tenant)
    count = publishing.PUBLISH_CHUNK + 50
    ids = [Execution.objects.create(job=job, organization=tenant.organization, queue=queue,
                                    scheduled_for=timezone.now() - timedelta(seconds=i + 1)).id for i in range(count)]
    rabbitmq.ctl("set_policy", "--apply-to", "queues", f"full-{queue}", f"^{queue}$",
                 '{"max-length": 1, "overflow": "reject-publish"}')
    with publishing_to(rabbitmq.url), caplog.at_level(logging.ERROR, logger="apps.executions.scheduling.publishing"):
        sent = publishing.publish({queue: ids})  # two messages: a full chunk, then 50
    assert sent == publishing.PUBLISH_CHUNK
    assert f"publish failed: 50 of {count} ids" in caplog.text
    assert len(waiting_ids(rabbitmq, queue)) == publishing.PUBLISH_CHUNK


def waiting_ids(rabbitmq, queue):
    """The run ids in the queue's waiting messages, over a connection of its own (a
    restart breaks any older one)."""
    broker = AmqpBroker(rabbitmq.url)
    try:
        return broker.published_ids(queue)
    finally:
        broker.close()
