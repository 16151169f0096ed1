"""Per-organization limits shared by all workers through Redis: concurrency and rate.

Both are single Lua scripts (check and update in one step, so two workers cannot both take
the last slot) and take the time as a parameter (wall-clock seconds shared by workers).
"""

from __future__ import annotations

import math
from functools import cached_property

_ACQUIRE = """
local key, holder, now = KEYS[1], ARGV[1], tonumber(ARGV[2])
local limit, lease = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)  -- leases of workers that died
local expires = string.format('%.17g', now + lease)
if redis.call('ZSCORE', key, holder) or redis.call('ZCARD', key) < limit then
  redis.call('ZADD', key, expires, holder)
  redis.call('EXPIRE', key, ARGV[5])
  return 1
end
return 0
"""

# ``_ACQUIRE`` for several holders of one key, in order: ARGV = now, limit, key TTL, then
# (holder, lease seconds) pairs; returns 1/0 per holder. One call instead of one per run.
_ACQUIRE_MANY = """
local key, now, limit = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)  -- leases of workers that died
local taken, added = {}, false
for i = 4, #ARGV, 2 do
  local holder = ARGV[i]
  if redis.call('ZSCORE', key, holder) or redis.call('ZCARD', key) < limit then
    redis.call('ZADD', key, string.format('%.17g', now + tonumber(ARGV[i + 1])), holder)
    added = true
    taken[#taken + 1] = 1
  else
    taken[#taken + 1] = 0
  end
end
if added then
  redis.call('EXPIRE', key, ARGV[3])
end
return taken
"""

_RENEW = """
local key, holder, now = KEYS[1], ARGV[1], tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
if not redis.call('ZSCORE', key, holder) then
  return 0
end
redis.call('ZADD', key, string.format('%.17g', now + tonumber(ARGV[3])), holder)
redis.call('EXPIRE', key, ARGV[4])
return 1
"""

_TAKE = """
local key, now = KEYS[1], tonumber(ARGV[1])
local rate, burst = tonumber(ARGV[2]), tonumber(ARGV[3])
local stored = redis.call('HMGET', key, 'tokens', 'at')
local tokens, at = tonumber(stored[1]) or burst, tonumber(stored[2]) or now
-- Workers' clocks differ a little: time never runs backwards for the bucket.
local elapsed = math.max(0, now - at)
tokens = math.min(burst, tokens + elapsed * rate)
local allowed, wait = 0, (1 - tokens) / rate
if tokens >= 1 then
  tokens, allowed, wait = tokens - 1, 1, 0
end
redis.call('HSET', key, 'tokens', string.format('%.17g', tokens),
           'at', string.format('%.17g', math.max(at, now)))
redis.call('EXPIRE', key, ARGV[4])
return {allowed, string.format('%.17g', wait)}
"""


class LeaseSemaphore:
    """At most ``limit`` holders at once; a holder's lease lapses after ``lease_seconds``
    unless renewed, so a worker killed mid-delivery does not hold its slot for ever."""

    def __init__(self, redis_client, key: str, limit: int, lease_seconds: float) -> None:
        self._redis = redis_client
        self.key = key
        self.limit = limit
        self.lease_seconds = lease_seconds

    # Registered on first use: a semaphore or bucket made only for its key or TTL (the
    # batched calls in apps.executions.worker.outbound) costs no script object and no SHA1.
    @cached_property
    def _acquire(self):
        return self._redis.register_script(_ACQUIRE)

    @cached_property
    def _renew(self):
        return self._redis.register_script(_RENEW)

    def acquire(self, holder_id: str, now: float) -> bool:
        """Take a slot (or extend the one ``holder_id`` already has)."""
        return bool(self._acquire(
            keys=[self.key],
            args=[holder_id, repr(float(now)), self.limit, repr(float(self.lease_seconds)),
                  self._key_ttl()],
        ))

    def renew(self, holder_id: str, now: float) -> bool:
        """Extend a lease still held; False if it lapsed (the slot may be someone else's)."""
        return bool(self._renew(
            keys=[self.key],
            args=[holder_id, repr(float(now)), repr(float(self.lease_seconds)), self._key_ttl()],
        ))

    def release(self, holder_id: str) -> None:
        self._redis.zrem(self.key, holder_id)

    def holders(self, now: float) -> int:
        """How many leases are live at ``now``."""
        return self._redis.zcount(self.key, f"({float(now)!r}", "+inf")

    def _key_ttl(self) -> int:
        return lease_key_ttl(self.lease_seconds)


def lease_key_ttl(lease_seconds: float) -> int:
    """How long a semaphore's key lives: garbage collection only, every lease in the key
    has lapsed by then."""
    return math.ceil(lease_seconds) + 60


class TokenBucket:
    """``rate_per_second`` deliveries a second on average, bursts of up to ``burst``."""

    def __init__(self, redis_client, key: str, rate_per_second: float, burst: int) -> None:
        if rate_per_second <= 0 or burst < 1:
            raise ValueError("rate_per_second must be > 0 and burst >= 1")
        self._redis = redis_client
        self.key = key
        self.rate_per_second = rate_per_second
        self.burst = burst

    @cached_property
    def _take(self):
        return self._redis.register_script(_TAKE)

    def take(self, now: float) -> tuple[bool, float]:
        """Take one token: (True, 0.0), or (False, seconds until one is available)."""
        allowed, wait = self._take(
            keys=[self.key],
            args=[repr(float(now)), repr(float(self.rate_per_second)), self.burst, self._key_ttl()],
        )
        return bool(allowed), float(wait)

    def _key_ttl(self) -> int:
        # Once the bucket would be full again its state carries no information.
        return math.ceil(self.burst / self.rate_per_second) + 60
