"""Publishing executions to Celery after they are committed.

Celery's cost of building a message would cap a scheduler's dispatches a second if every
execution were its own message (bench/README.md, "Figures behind the code"). So executions go
out in chunks: one message carries up to PUBLISH_CHUNK ids for one queue, and the worker runs
them concurrently. The database stays the source of truth: a chunk that is never published
(broker down, process killed) is found by the sweeper and published again.

The messages of one call go to Redis together, in one pipeline (kombu's
``Producer.batch``): one round trip and one Redis client per call instead of one per
message, which cuts the cost of a message (bench/README.md, "Figures behind the code").
RabbitMQ's transport has no batch: there each message is sent at once and the publish
waits for the broker's confirm (cronsvc/brokers.py), one round trip per message of up to
PUBLISH_CHUNK ids.

A publish never holds its caller while the broker is silent for PUBLISH_TIMEOUT seconds:
the messages are sent by one publisher thread per process, and a caller waits for it as
long as it makes progress (a message sent within PUBLISH_TIMEOUT: a big publish to
RabbitMQ, confirmed message by message, may take longer as a whole). A broker that does not
answer (blackholed, stalled) leaves the thread waiting on its socket timeouts
(REDIS_SOCKET_TIMEOUT, CONFIRM_TIMEOUT) while the caller goes on, and every publish asked
meanwhile is skipped at once: the runs stay queued in the database and the sweeper
sends them once the broker answers again (docs/operations.md). So a scheduler keeps
recording while its broker is unreachable.
"""

import logging
import os
import threading
import time
from collections import defaultdict
import queue as queues
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

from celery import current_app as app  # config/celery.py's: Celery's Django fix-up makes it every thread's
from django.conf import settings

from cronsvc.brokers import CONFIRM_TIMEOUT

from ..routing import LOW, priority_of

log = logging.getLogger(__name__)

RUN_TASK = "apps.executions.tasks.run_executions"
# Per message: the worker pays its per-message, per-claim and per-group costs once; past
# 250 a larger message delivered no more a second (bench/bench_delivery.py --chunk; the
# figures in bench/README.md, "Delivery").
PUBLISH_CHUNK = 250
#: Low-priority runs go out in small messages: a worker process takes its next message (a
#: high one first, routing.py) only when it has finished the one in hand, so the size of a
#: low message bounds how long a high run waits behind a low backlog (bench/bench_priority.py).
LOW_PRIORITY_CHUNK = 10


def chunked(items, size):
    for start in range(0, len(items), size):
        yield items[start:start + size]


_publisher = {"pid": None, "executor": None, "pending": None, "progress_at": 0.0}
_publisher_lock = threading.Lock()


def publish(ids_by_queue):
    """Send each queue's ids in chunks, waiting at most PUBLISH_TIMEOUT seconds. Returns how
    many ids were handed to the broker; failures, a publish cut short and one skipped while
    an earlier one still waits on the broker are logged and left for the sweeper."""
    total = sum(len(ids) for ids in ids_by_queue.values())
    if not total:
        return 0
    with _publisher_lock:
        if _publisher["pid"] != os.getpid():  # a forked child starts its own thread
            _publisher.update(pid=os.getpid(), executor=_PublisherThread(), pending=None)
        pending = _publisher["pending"]
        if pending is not None and not pending.done() and _stalled():
            log.warning("publish skipped: an earlier publish still waits on the broker; the sweeper will send "
                        "these %d ids", total)
            return 0
        if pending is None or pending.done():
            _progress()
        future = _publisher["executor"].submit(_send, ids_by_queue, total)
        _publisher["pending"] = future
    while True:
        try:
            return future.result(timeout=settings.PUBLISH_TIMEOUT)
        except FutureTimeout:
            if _stalled():
                log.warning("publish: the broker did not answer within %.1fs; %d ids are left for the sweeper",
                            settings.PUBLISH_TIMEOUT, total)
                return 0


def _progress():
    _publisher["progress_at"] = time.monotonic()


def _stalled():
    """True when the publisher thread sent nothing for PUBLISH_TIMEOUT seconds."""
    return time.monotonic() - _publisher["progress_at"] > settings.PUBLISH_TIMEOUT


class _PublisherThread:
    """One daemon thread sending what it is handed, in order (a daemon: a process stopping
    while the broker hangs does not wait for it; the sweeper sends what it had)."""

    def __init__(self):
        self._work = queues.SimpleQueue()
        threading.Thread(target=self._run, name="publisher", daemon=True).start()

    def submit(self, function, *args):
        future = Future()
        self._work.put((future, function, args))
        return future

    def _run(self):
        while True:
            future, function, args = self._work.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(function(*args))
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    future.set_exception(exc)


def _send(ids_by_queue, total):
    confirmed_each = settings.BROKER_KIND == "amqp"  # a send returns once RabbitMQ confirmed it
    published = 0
    _progress()
    try:
        with app.producer_pool.acquire(block=True) as producer:
            with producer.batch():
                for queue, ids in ids_by_queue.items():
                    size = LOW_PRIORITY_CHUNK if priority_of(queue) == LOW else PUBLISH_CHUNK
                    for chunk in chunked([str(i) for i in ids], size):
                        app.send_task(RUN_TASK, args=[chunk], queue=queue, producer=producer,
                                      confirm_timeout=CONFIRM_TIMEOUT)
                        _progress()
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
