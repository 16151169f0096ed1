"""The total deadlines of the deliveries in flight on one event loop, watched by one timer.

``asyncio.timeout`` arms a timer per delivery and cancels it when the delivery ends, a cost
paid thousands of times a second by a busy worker (bench/README.md, "Figures behind the code").
Here deliveries are filed by the tick their deadline falls in, and one timer a tick expires the
filed ones whose tick has passed: a delivery ends at most ``tick`` seconds after its deadline,
never before it.

Loop-bound: use it from its loop's thread only. ``expire`` is called on the loop's thread
between task steps, so it never interrupts the code that withdraws a finished delivery.
"""

from __future__ import annotations

import asyncio
import math
from typing import Callable

DEFAULT_TICK = 0.05  # seconds


class TickDeadlines:
    def __init__(self, loop: asyncio.AbstractEventLoop, tick: float = DEFAULT_TICK) -> None:
        self.loop = loop
        self.tick = tick
        self._filed: dict[int, dict[object, Callable[[], None]]] = {}  # tick -> {key: expire}
        self._timer: asyncio.TimerHandle | None = None

    def add(self, key: object, seconds: float, expire: Callable[[], None]) -> int:
        """Call ``expire()`` once ``seconds`` have passed, unless ``withdraw``n first.
        Returns the tick to withdraw it from."""
        tick = math.ceil((self.loop.time() + seconds) / self.tick)
        self._filed.setdefault(tick, {})[key] = expire
        if self._timer is None:
            self._arm()
        return tick

    def withdraw(self, key: object, tick: int) -> None:
        filed = self._filed.get(tick)
        if filed is not None:
            filed.pop(key, None)
            if not filed:
                del self._filed[tick]

    def __len__(self) -> int:
        return sum(len(filed) for filed in self._filed.values())

    def _arm(self) -> None:
        self._timer = self.loop.call_at((math.floor(self.loop.time() / self.tick) + 1) * self.tick, self._expire_due)

    def _expire_due(self) -> None:
        self._timer = None
        now = self.loop.time() / self.tick
        for tick in [tick for tick in self._filed if tick <= now]:
            for expire in self._filed.pop(tick).values():
                expire()
        if self._filed:
            self._arm()
