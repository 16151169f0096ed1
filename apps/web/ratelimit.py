"""Counters in fixed time windows, in the "web" cache (Redis when REDIS_URL is set, so
every web process shares them; process memory in the embedded mode's single web process).
"""

import time

from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache

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
    if isinstance(cache, RedisCache):
        return _redis_hit(cache, key, window)
    cache.add(key, 0, timeout=window + 5)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.add(key, 1, timeout=window + 5)
        return 1


def _redis_hit(cache, key, window):
    """INCR and EXPIRE in one round trip (the cache API's add + incr takes three; the ping
    URLs count every ping here). Django's Redis cache stores integers as they are, so
    ``count`` reads the counter back."""
    full_key = cache.make_and_validate_key(key)
    pipeline = _redis_client(cache).pipeline(transaction=False)
    pipeline.incr(full_key)
    pipeline.expire(full_key, window + 5)
    return pipeline.execute()[0]


_clients = {}  # connection pool -> its redis.Redis


def _redis_client(cache):
    """A client on the cache's connection pool, made once: Django's RedisCache builds a
    new redis.Redis for every call (about 0.2 ms of CPU, more than the round trip)."""
    pool = cache._cache._get_connection_pool(write=True)
    client = _clients.get(pool)
    if client is None:
        client = _clients[pool] = cache._cache._client(connection_pool=pool)
    return client


def reset(name, ident, *, window):
    key, _ = _key(name, ident, window, clock())
    caches[CACHE_ALIAS].delete(key)
