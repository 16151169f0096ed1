"""A total deadline per delivery, enforced by shutting the socket down when it passes.

Socket timeouts bound each read, not the whole response: a server dripping one byte per
second keeps every read short and the delivery alive forever. So each delivery runs in a
``DeadlineScope``; the connection classes in ``transport`` attach the connection currently
in use, and one watchdog thread per process shuts that socket down at the deadline, which
makes the blocked read return at once. The delivery then reports a timeout.

One shared thread, not a timer per delivery: arming costs a heap push, not a thread start.
"""

from __future__ import annotations

import contextvars
import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

# Firing is batched to at most this resolution, so a busy worker's thousands of cancelled
# entries do not wake the watchdog thousands of times a second.
WATCHDOG_RESOLUTION_SECONDS = 0.01

_current: contextvars.ContextVar[DeadlineScope | None] = contextvars.ContextVar(
    "cronsvc_delivery_deadline", default=None
)


class DeadlineScope:
    """The deadline of one delivery and the connection it is currently using."""

    __slots__ = ("deadline", "expired", "cancelled", "remote_addr", "request_started", "_conn", "_done")

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline  # time.monotonic()
        self.expired = False
        self.cancelled = False  # ended early on purpose (Cancellation), not by its deadline
        self.remote_addr: str | None = None
        self.request_started = False  # set when the current hop starts sending
        self._conn: Any = None
        self._done = False

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def attach(self, conn: Any) -> None:
        """Called by the connection classes whenever ``conn`` starts work for this scope."""
        self._conn = conn
        conn.cronsvc_scope = self
        if getattr(conn, "remote_addr", None):
            self.remote_addr = conn.remote_addr

    def fire(self) -> None:
        if self._done:
            return
        self.expired = True
        conn = self._conn
        # A connection released to the pool may already serve another delivery: only shut
        # down what still belongs to this scope.
        if conn is None or getattr(conn, "cronsvc_scope", None) is not self:
            return
        sock = getattr(conn, "sock", None)
        if sock is not None:
            try:
                # The plain socket method: SSLSocket.shutdown would also drop its SSL state
                # under the feet of the thread that is reading.
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
            except OSError:
                pass

    def cancel(self) -> None:
        """End the delivery now, from any thread: as the deadline would, but reported as
        a cancel (the blocked read returns at once; a request not sent yet is not sent)."""
        self.cancelled = True
        self.fire()

    def finish(self) -> None:
        self._done = True


class Cancellation:
    """A cancel that another thread may ask for before or while a delivery is in flight
    (``deliver(..., cancellation=)``): asked before, the request is never sent; asked
    during, its connection is shut down at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scope: DeadlineScope | None = None
        self.cancelled = False

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            scope = self._scope
        if scope is not None:
            scope.cancel()

    def bind(self, scope: DeadlineScope) -> None:
        """Called by ``deliver`` once its scope exists."""
        with self._lock:
            self._scope = scope
            cancelled = self.cancelled
        if cancelled:
            scope.cancel()


def current_scope() -> DeadlineScope | None:
    return _current.get()


@contextmanager
def deadline_scope(timeout: float) -> Iterator[DeadlineScope]:
    """Run a delivery under a total deadline of ``timeout`` seconds from now."""
    scope = DeadlineScope(time.monotonic() + timeout)
    token = _current.set(scope)
    _watchdog.watch(scope)
    try:
        yield scope
    finally:
        scope.finish()
        _current.reset(token)


class _Watchdog:
    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        # Also run in a forked child (Celery prefork): the parent's thread does not exist
        # there and its lock may be held.
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, DeadlineScope]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, scope: DeadlineScope) -> None:
        with self._cond:
            heapq.heappush(self._heap, (scope.deadline, next(self._seq), scope))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="cronsvc-delivery-deadline", daemon=True
                )
                self._thread.start()
            elif self._heap[0][2] is scope:
                self._cond.notify()

    def _run(self) -> None:
        while True:
            for scope in self._wait_for_due():
                scope.fire()

    def _wait_for_due(self) -> list[DeadlineScope]:
        with self._cond:
            while True:
                now = time.monotonic()
                due = []
                while self._heap and self._heap[0][0] <= now:
                    due.append(heapq.heappop(self._heap)[2])
                if due:
                    return due
                timeout = self._heap[0][0] - now if self._heap else None
                if timeout is not None:
                    timeout = max(timeout, WATCHDOG_RESOLUTION_SECONDS)
                self._cond.wait(timeout)


_watchdog = _Watchdog()
os.register_at_fork(after_in_child=_watchdog._reset)
