"""Counters in fixed time windows, in the "web" cache (Redis when REDIS_URL is set, so
every web process shares them; process memory in the embedded mode's single web process).
"""

import time

from django.core.cache import caches

CACHE_ALIAS = "web"
clock = time.time  # tests may pin it


def _key(name, ident, window, now):
    start = int(now) - int(now) % window
    return f"{name}:{ident}:{window}:{start}", start + window


def count(name, ident, *, window):
    """How many hits ``ident`` has in the current window, and seconds until it ends."""
    now = clock()
    key, ends = _key(name, ident, window, now)
    return int(caches[CACHE_ALIAS].get(key) or 0), max(1, int(ends - now))


def hit(name, ident, *, window):
    """Count one hit; returns the new count in this window."""
    now = clock()
    key, _ = _key(name, ident, window, now)
    cache = caches[CACHE_ALIAS]
    cache.add(key, 0, timeout=window + 5)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=window + 5)
        return 1


def reset(name, ident, *, window):
    key, _ = _key(name, ident, window, clock())
    caches[CACHE_ALIAS].delete(key)
