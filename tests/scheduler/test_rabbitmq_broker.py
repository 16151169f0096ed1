"""Publishing to RabbitMQ and reading its queue depths, on the machine's real server (each
test on a queue of its own)."""

import pytest
from amqp.exceptions import PreconditionFailed

from apps.executions.scheduling import publishing
from apps.executions.scheduling.broker_queues import queue_depths
from tests.support.broker import queued_runs
from tests.support.processes import wait_for

pytestmark = [pytest.mark.django_db(transaction=True),
              pytest.mark.parametrize("live_broker", ["rabbitmq"], indirect=True)]


@pytest.fixture
def queue(live_broker, tenant):
    return live_broker.private_queue(tenant)


def test_runs_are_published_as_persistent_messages_in_a_durable_queue(live_broker, queue, make_job, tenant):
    count = publishing.PUBLISH_CHUNK + 50
    ids = queued_runs(make_job(tenant), queue, count)
    assert publishing.publish({queue: ids}) == count
    messages = live_broker.messages(queue)
    assert [m.properties["delivery_mode"] for m in messages] == [2, 2]  # persistent: a full chunk, then 50
    assert sorted(live_broker.published_ids(queue)) == sorted(str(i) for i in ids)
    channel = live_broker.connection.channel()
    channel.queue_declare(queue, durable=True, auto_delete=False)  # the same queue again: it is durable
    with pytest.raises(PreconditionFailed):
        channel.queue_declare(queue, durable=False, auto_delete=False)


def test_queue_depths_count_the_messages_waiting(live_broker, queue, make_job, tenant):
    job = make_job(tenant)
    for run in queued_runs(job, queue, 3):
        publishing.publish({queue: [run]})
    assert queue_depths([queue, f"{queue}.never-used"]) == {queue: 3, f"{queue}.never-used": 0}
    consumer = live_broker.connection.channel()
    taken = consumer.basic_get(queue, no_ack=False)  # a worker holds it, not yet acknowledged
    assert taken is not None
    assert queue_depths([queue]) == {queue: 2}
    consumer.close()  # unacknowledged: back in the queue (RabbitMQ requeues it a moment after the close)
    wait_for(lambda: queue_depths([queue]) == {queue: 3}, timeout=10, message="the message back in the queue")
