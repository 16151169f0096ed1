"""The ping ids this web process has seen, with their monitors' Targets.

A ping needs its monitor's id, organization and schedule before its statement (the next
expected ping is computed in Python from a cron schedule). A monitor's id and organization
never change, and apps.monitors.pings's statement refuses a Target whose schedule is no
longer the monitor's (the ping then reads it again), so a cached Target is never wrong,
only possibly out of date. Bounded: the least recently used ping ids go first.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

MAX_TARGETS = 50_000


class Targets:
    def __init__(self, size=MAX_TARGETS):
        self.size = size
        self._entries = OrderedDict()
        self._lock = threading.Lock()

    def get(self, ping_id):
        with self._lock:
            target = self._entries.get(ping_id)
            if target is not None:
                self._entries.move_to_end(ping_id)
            return target

    def put(self, ping_id, target):
        if ping_id is None:
            return
        if target is None:
            self.forget(ping_id)
            return
        with self._lock:
            self._entries[ping_id] = target
            self._entries.move_to_end(ping_id)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def forget(self, ping_id):
        with self._lock:
            self._entries.pop(ping_id, None)

    def clear(self):
        with self._lock:
            self._entries.clear()


targets = Targets()
