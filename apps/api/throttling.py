"""Request quotas: per API key (or session user) by the plan's api_requests_per_minute,
and per client IP on API-key creation.

Fixed one-minute windows counted with an atomic INCR in the "api" cache (Redis when
REDIS_URL is set, so every web process shares the count). DRF's SimpleRateThrottle keeps
a list of timestamps per client and writes it back non-atomically: too heavy at
thousands of requests a minute and racy across processes.
"""

import logging
import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from rest_framework.throttling import BaseThrottle

CACHE_ALIAS = "api"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Quota:
    limit: int
    count: int
    reset_at: int  # epoch seconds at which the window ends

    @property
    def allowed(self):
        return self.count <= self.limit

    @property
    def remaining(self):
        return max(0, self.limit - self.count)

    def headers(self):
        return {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset_at),
        }


def count_hit(ident, limit, *, window, now):
    """Count one request of ``ident`` in the window containing ``now``. When the cache is
    unreachable the request is let through (count 0): a Redis outage must not stop the API."""
    start, key = _window_key(ident, window, now)
    cache = caches[CACHE_ALIAS]
    try:
        count = _incr(cache, key, timeout=window + 5)
    except Exception:  # noqa: BLE001 - any cache failure: fail open, loudly
        log.warning("rate-limit cache unavailable; %s not counted", ident, exc_info=True)
        count = 0
    return Quota(limit, count, start + window)


def _window_key(ident, window, now):
    start = int(now) - int(now) % window
    return start, f"rl:{ident}:{window}:{start}"


def _incr(cache, key, *, timeout):
    """The key's new count. On Redis: INCR and EXPIRE NX in one round trip (every API
    request pays it); elsewhere (the embedded mode's memory cache) through the cache API."""
    if isinstance(cache, RedisCache):
        full_key = cache.make_and_validate_key(key)
        pipe = _writer(cache).pipeline(transaction=False)
        pipe.incr(full_key)
        pipe.expire(full_key, timeout, nx=True)
        return pipe.execute()[0]
    cache.add(key, 0, timeout=timeout)
    try:
        return cache.incr(key)
    except ValueError:  # expired between add and incr: a fresh window
        cache.add(key, 1, timeout=timeout)
        return 1


def _writer(cache):
    """The cache's Redis client for writes, made once per process (Django makes a new one,
    with its table of 170 reply callbacks, on every call); it is thread-safe."""
    client = getattr(cache, "_throttle_writer", None)
    if client is None:
        client = cache._throttle_writer = cache._cache.get_client(write=True)
    return client


def redis_client():
    """The "api" cache's Redis client (only when that cache is Redis)."""
    return _writer(caches[CACHE_ALIAS])


# INCR + EXPIRE of the window's counter, then GET of each other key, in one call: the API
# key cache (apps/api/keycache.py) checks its stamps in the call that counts the request.
_COUNT_AND_READ = """
local count = redis.call('INCR', KEYS[1])
if count == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
local out = {count}
for i = 2, #KEYS do out[i] = redis.call('GET', KEYS[i]) end
return out
"""


def count_and_read(ident, limit, read_keys, *, window, now):
    """``count_hit`` on Redis that also returns the values of ``read_keys`` (full cache
    keys; None where missing). Raises when Redis fails: the caller decides."""
    start, key = _window_key(ident, window, now)
    cache = caches[CACHE_ALIAS]
    client = _writer(cache)
    script = getattr(client, "_count_and_read", None)
    if script is None:
        script = client._count_and_read = client.register_script(_COUNT_AND_READ)
    count, *values = script(keys=[cache.make_and_validate_key(key), *read_keys], args=[window + 5])
    values += [None] * (len(read_keys) - len(values))  # a trailing nil ends a Lua array
    return Quota(limit, count, start + window), values


class _WindowThrottle(BaseThrottle):
    timer = time.time  # tests pin it: no test depends on the wall clock
    window = 60
    quota = None

    def wait(self):
        return max(1, self.quota.reset_at - int(self.timer())) if self.quota else None


class PlanRateThrottle(_WindowThrottle):
    """Per API key (or user) and organization: the plan's requests per minute."""

    @staticmethod
    def ident_and_limit(organization, principal):
        return f"{organization.pk}:{principal}", organization.plan.api_requests_per_minute

    def allow_request(self, request, view):
        actor = getattr(request, "actor", None)
        if actor is None:
            return True  # unauthenticated requests were refused before this
        self.quota = getattr(request, "counted_rate_limit", None)  # by the API key cache's Redis call
        if self.quota is None:
            ident, limit = self.ident_and_limit(actor.organization, actor.principal)
            self.quota = count_hit(ident, limit, window=self.window, now=self.timer())
        request.rate_limit = self.quota  # turned into X-RateLimit-* headers by the views
        return self.quota.allowed


class KeyCreationIPThrottle(_WindowThrottle):
    """Per client IP: API keys created per hour (a stolen session cannot mint keys in bulk)."""

    window = 3600

    def allow_request(self, request, view):
        limit = settings.API_KEY_CREATE_PER_IP_PER_HOUR
        self.quota = count_hit(f"ip:{self.get_ident(request)}", limit, window=self.window, now=self.timer())
        return self.quota.allowed
