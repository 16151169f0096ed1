"""Priority under overload: which plan queues are backed up right now.

A plan queue (with its priority sub-queues, see routing.py) is *overloaded* while more
than OVERLOAD_QUEUE_DEPTH messages wait in it. While it is, the scheduler does not
publish the low-priority runs that come due for it: they are inserted queued, unpublished,
with ``defer_reason="overload"`` (visible in history), and the scheduler's every-tick
publish of unpublished runs (sweeper.due_retries) passes them over until the queue is
back under the threshold; then they go out, oldest first, at most a tick's batch at a
time. The database holds them, so none is lost whatever happens to the processes.

The depths come from the broker (broker_queues.queue_depths: one pipelined LLEN per list
on Redis, a passive declare per queue on RabbitMQ), read at most every
OVERLOAD_CHECK_INTERVAL seconds per scheduler, so the hot path pays a set lookup. When the
broker cannot say (down, blackholed: each read waits out its timeout), the last answer is
kept and the next read waits FAILED_READ_BACKOFF seconds, so an unreachable broker does not
slow every tick by a timeout.
"""

import logging
import time

from django.conf import settings

from . import broker_queues
from ..routing import base_queue

log = logging.getLogger(__name__)

FAILED_READ_BACKOFF = 15.0  # seconds before asking a broker that did not answer again


class OverloadGate:
    def __init__(self, *, threshold=None, interval=None, depths=None, clock=time.monotonic):
        self.threshold = settings.OVERLOAD_QUEUE_DEPTH if threshold is None else threshold
        self.interval = settings.OVERLOAD_CHECK_INTERVAL if interval is None else interval
        self._depths = depths or (lambda: broker_queues.queue_depths(broker_queues.known_queues()))
        self._clock = clock
        self._checked_at = None
        self._overloaded = frozenset()

    def overloaded(self):
        """The base queues (plan, or plan.region) holding more than the threshold."""
        if self.threshold <= 0:
            return frozenset()
        now = self._clock()
        if self._checked_at is None or now - self._checked_at >= self.interval:
            self._checked_at = now
            self._overloaded = self._read()
        return self._overloaded

    def _read(self):
        try:
            depths = self._depths()
        except Exception:  # noqa: BLE001 - the broker cannot say: keep the last answer
            log.warning("overload: queue depths unavailable; keeping the last answer for %.0fs", FAILED_READ_BACKOFF,
                        exc_info=True)
            self._checked_at = self._clock() + FAILED_READ_BACKOFF - self.interval
            return self._overloaded
        return overloaded_queues(depths, self.threshold)


def overloaded_queues(depths, threshold):
    """{queue: waiting messages} -> base queues whose sub-queues together exceed ``threshold``."""
    totals = {}
    for queue, depth in depths.items():
        totals[base_queue(queue)] = totals.get(base_queue(queue), 0) + depth
    return frozenset(queue for queue, total in totals.items() if total > threshold)
