"""The Redis client for state the processes share about runs: cancel flags (cancelling.py),
and the worker's limits and circuit breakers (worker/outbound.py). None without Redis
(embedded mode), where the database answers instead."""

import os
from functools import lru_cache

import redis
from django.conf import settings


@lru_cache(maxsize=1)
def redis_client():
    """One per process, with the timeouts of every Redis client (REDIS_CLIENT_OPTIONS)."""
    return redis.Redis.from_url(settings.REDIS_URL, **settings.REDIS_CLIENT_OPTIONS) if settings.REDIS_URL else None


# A forked child builds its own on first use; the parent's socket is only dereferenced.
os.register_at_fork(after_in_child=redis_client.cache_clear)
