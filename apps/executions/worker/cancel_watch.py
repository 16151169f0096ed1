"""A worker process's watch for cancels of the runs it has in flight.

Each run's request carries a ``Cancellation`` (cronsvc.delivery.cancellation). While the
process has runs in flight, one thread asks every DELIVERY_CANCEL_CHECK_SECONDS which of
them were cancelled (apps.executions.cancelling.raised: one Redis MGET) and cancels those
requests, which shuts their connections down at once. While no flag was raised since its
last look (a counter beside the flags), it asks only about the runs started since then,
not again about every run still in flight. With nothing in flight the thread sleeps and
asks nothing.
"""

import logging
import os
import threading
import time

from django.conf import settings

from cronsvc.delivery.cancellation import Cancellation

from ..cancelling import generation, raised
from .logcontext import about_ids

log = logging.getLogger(__name__)


class CancelWatch:
    def __init__(self, interval):
        self.interval = interval
        self._watched = {}
        self._job_ids = {}  # execution id -> job id, for the log line of a cancel
        self._cond = threading.Condition()
        self._thread = None
        self._generation, self._asked = None, set()

    def watch(self, execution_id, job_id=None):
        """A Cancellation for this run's request, watched until ``forget``."""
        cancellation = Cancellation()
        with self._cond:
            was_idle = not self._watched
            self._watched[execution_id] = cancellation
            self._job_ids[execution_id] = job_id
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="delivery-cancel-watch", daemon=True)
                self._thread.start()
            if was_idle:
                # Only an idle watch is woken: a notify per run started cut every interval
                # short, and a busy process looked as often as it started runs.
                self._cond.notify()
        return cancellation

    def forget(self, execution_id):
        with self._cond:
            self._watched.pop(execution_id, None)
            self._job_ids.pop(execution_id, None)

    def check_once(self):
        with self._cond:
            watched = dict(self._watched)
        # Read first: a flag raised before the count went up is then seen by the MGET below.
        count = generation()
        if count is None or count != self._generation:
            asked = watched
        else:  # no flag raised since the last look: only the runs started since then
            asked = {execution_id: c for execution_id, c in watched.items() if execution_id not in self._asked}
        found = raised(asked)
        # Marked as asked only once the flags were read: a read that fails (Redis away)
        # leaves every run to be asked again next time, so no cancel is lost.
        self._generation, self._asked = count, set(watched)
        for execution_id in found:
            with about_ids(execution_id, self._job_ids.get(execution_id)):
                log.info("execution %s: cancelled while in flight; closing its request", execution_id)
            watched[execution_id].cancel()

    def _loop(self):
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._watched)
            time.sleep(self.interval)  # a run just started is checked within one interval
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
