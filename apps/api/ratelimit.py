"""Counters in fixed time windows, in the "web" cache (Redis when REDIS_URL is set, so
every web process shares them; process memory in the embedded mode's single web process).

The pages count log-ins, SSO starts and test runs here, the monitors' ping fast lane
every ping, the API failed key authentications: so it sits in apps.api, below both.
``send_wait`` is the one limit of every action that sends a message on request (password
reset, invitations, channel tests).
"""

import time

from django.conf import settings
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


# INCR, and EXPIRE on a window's first hit, in one command: a pipeline of the two costs
# redis-py three times the CPU, and every ping is counted here.
_INCR_WITH_EXPIRY = """
local hits = redis.call('INCR', KEYS[1])
if hits == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return hits
"""


def _redis_hit(cache, key, window):
    """Django's Redis cache stores integers as they are, so ``count`` reads the counter back."""
    full_key = cache.make_and_validate_key(key)
    return _incr_script(cache)(keys=[full_key], args=[window + 5])


_scripts = {}  # connection pool -> the registered script


def _incr_script(cache):
    client = _redis_client(cache)
    script = _scripts.get(client.connection_pool)
    if script is None:
        script = _scripts[client.connection_pool] = client.register_script(_INCR_WITH_EXPIRY)
    return script


_clients = {}  # connection pool -> its redis.Redis


def _redis_client(cache):
    """A client on the cache's connection pool, made once: Django's RedisCache builds a
    new redis.Redis for every call, which costs more CPU than the round trip (bench/README.md,
    "Figures behind the code")."""
    pool = cache._cache._get_connection_pool(write=True)
    client = _clients.get(pool)
    if client is None:
        client = _clients[pool] = cache._cache._client(connection_pool=pool)
    return client


def reset(name, ident, *, window):
    key, _ = _key(name, ident, window, clock())
    caches[CACHE_ALIAS].delete(key)


# --- messages sent on request

SEND_WINDOW = 3600


def send_wait(*, address=None, organization=None, client=None):
    """Count one message an action is about to send on request (a password reset, an
    invitation, a channel test): None when it may go, else the seconds until it may (and
    nothing is counted). Limited per hour to one recipient ``address`` (an e-mail address,
    or a channel's "channel:<id>"), for one ``organization`` and asked by one ``client``
    address (MAIL_PER_ADDRESS_PER_HOUR, MAIL_PER_ORGANIZATION_PER_HOUR,
    MAIL_PER_CLIENT_PER_HOUR). The count never depends on whether the address has an
    account: a refusal tells nothing about it."""
    checks = [(name, str(ident).strip().lower(), limit) for name, ident, limit in (
        ("send-address", address, settings.MAIL_PER_ADDRESS_PER_HOUR),
        ("send-organization", getattr(organization, "pk", organization), settings.MAIL_PER_ORGANIZATION_PER_HOUR),
        ("send-client", client, settings.MAIL_PER_CLIENT_PER_HOUR)) if ident]
    for name, ident, limit in checks:
        sent, seconds_left = count(name, ident, window=SEND_WINDOW)
        if sent >= limit:
            return seconds_left
    for name, ident, _ in checks:
        hit(name, ident, window=SEND_WINDOW)
    return None
