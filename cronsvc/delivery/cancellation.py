"""A cancel that another thread may ask for before or while a delivery is in flight."""

from __future__ import annotations

import threading
from typing import Protocol


class _Scope(Protocol):
    """What a delivery in flight offers to be cancelled (``aio``'s scope of one delivery)."""

    def cancel(self) -> None: ...


class Cancellation:
    """A cancel that another thread may ask for before or while a delivery is in flight
    (``deliver_async(..., cancellation=)``): asked before, the request is never sent; asked
    during, the delivery ends at once and its connection is closed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scope: _Scope | None = None
        self.cancelled = False

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            scope = self._scope
        if scope is not None:
            scope.cancel()

    def bind(self, scope: _Scope) -> None:
        """Called by the delivery once its scope exists."""
        with self._lock:
            self._scope = scope
            cancelled = self.cancelled
        if cancelled:
            scope.cancel()
