"""Publishing executions to Celery after they are committed.

Celery spends ~300 µs building each message, which would cap a scheduler at 2–3k
dispatches/s if every execution were its own message. So executions go out in chunks:
one message carries up to PUBLISH_CHUNK ids for one queue, and the worker runs them
concurrently. The database stays the source of truth: a chunk that is never published
(broker down, process killed) is found by the sweeper and published again.

The messages of one call go to Redis together, in one pipeline (kombu's
``Producer.batch``): one round trip and one Redis client per call instead of one per
message, which more than halves the cost of a message (bench/bench_scheduler.py).
RabbitMQ's transport has no batch: there each message is sent at once and the publish
waits for the broker's confirm (config/brokers.py), one round trip per message of up to
PUBLISH_CHUNK ids.
"""

import logging
from collections import defaultdict

from django.conf import settings

from config.brokers import CONFIRM_TIMEOUT
from config.celery import app

from .routing import LOW, priority_of

log = logging.getLogger(__name__)

RUN_TASK = "apps.executions.tasks.run_executions"
# Per message: the worker pays its per-message, per-claim and per-group costs once. 250
# delivered ~9 % more a second than 100 to a fast target, and 500 or 1,000 no more
# (bench/bench_delivery.py --chunk, bench/README.md).
PUBLISH_CHUNK = 250
#: Low-priority runs go out in small messages: a worker process takes its next message (a
#: high one first, routing.py) only when it has finished the one in hand, so the size of a
#: low message bounds how long a high run waits behind a low backlog (bench/bench_priority.py).
LOW_PRIORITY_CHUNK = 10


def chunked(items, size):
    for start in range(0, len(items), size):
        yield items[start:start + size]


def publish(ids_by_queue):
    """Send each queue's ids in chunks. Returns how many ids were handed to the broker;
    failures are logged and left for the sweeper."""
    confirmed_each = settings.BROKER_KIND == "amqp"  # a send returns once RabbitMQ confirmed it
    total = sum(len(ids) for ids in ids_by_queue.values())
    published = 0
    try:
        with app.producer_pool.acquire(block=True) as producer:
            with producer.batch():
                for queue, ids in ids_by_queue.items():
                    size = LOW_PRIORITY_CHUNK if priority_of(queue) == LOW else PUBLISH_CHUNK
                    for chunk in chunked([str(i) for i in ids], size):
                        app.send_task(RUN_TASK, args=[chunk], queue=queue, producer=producer,
                                      confirm_timeout=CONFIRM_TIMEOUT)
                        if confirmed_each:
                            published += len(chunk)
            # Leaving the batch without an error flushed it.
            published = total
    except Exception:  # noqa: BLE001 - any broker failure is repaired by the sweeper
        log.exception("publish failed: %d of %d ids may not have reached the broker; the sweeper will re-publish "
                      "them", total - published, total)
    return published


def group_by_queue(rows):
    """rows: iterable of (execution id, queue) -> {queue: [ids]}."""
    grouped = defaultdict(list)
    for execution_id, queue in rows:
        grouped[queue].append(execution_id)
    return grouped
