"""A worker process's watch for cancels of the runs it has in flight.

Each run's request carries a ``Cancellation`` (cronsvc.delivery.deadline). While the
process has runs in flight, one thread asks every DELIVERY_CANCEL_CHECK_SECONDS which of
them were cancelled (apps.executions.cancelling.raised: one Redis MGET for all of them)
and cancels those requests, which shuts their connections down at once. With nothing in
flight the thread sleeps and asks nothing.
"""

import logging
import os
import threading

from django.conf import settings

from cronsvc.delivery.deadline import Cancellation

from .cancelling import raised

log = logging.getLogger(__name__)


class CancelWatch:
    def __init__(self, interval):
        self.interval = interval
        self._watched = {}
        self._cond = threading.Condition()
        self._thread = None

    def watch(self, execution_id):
        """A Cancellation for this run's request, watched until ``forget``."""
        cancellation = Cancellation()
        with self._cond:
            self._watched[execution_id] = cancellation
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="delivery-cancel-watch", daemon=True)
                self._thread.start()
            self._cond.notify()
        return cancellation

    def forget(self, execution_id):
        with self._cond:
            self._watched.pop(execution_id, None)

    def check_once(self):
        with self._cond:
            watched = dict(self._watched)
        for execution_id in raised(watched):
            log.info("execution %s: cancelled while in flight; closing its request", execution_id)
            watched[execution_id].cancel()

    def _loop(self):
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._watched)
                self._cond.wait(self.interval)  # a run just started is checked after one interval
            try:
                self.check_once()
            except Exception:  # noqa: BLE001 - Redis away: the requests run on, the runs stay cancelled
                log.warning("checking for cancelled runs failed", exc_info=True)


_watch = {"pid": None, "watch": None}
_lock = threading.Lock()


def cancel_watch():
    """The process's watch (a forked child makes its own: threads do not survive a fork)."""
    with _lock:
        if _watch["pid"] != os.getpid():
            _watch.update(pid=os.getpid(), watch=CancelWatch(settings.DELIVERY_CANCEL_CHECK_SECONDS))
        return _watch["watch"]
