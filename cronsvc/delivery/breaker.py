"""A circuit breaker per target host, shared by every worker through Redis.

closed     deliveries go through; consecutive failures are counted.
open       ``failure_threshold`` consecutive failures: deliveries are held back until
           ``cooldown_seconds`` have passed.
half_open  after the cooldown exactly one caller gets to probe the host; the others are
           still held back. The probe's success closes the breaker, its failure re-opens it
           for a fresh cooldown. A probe that never reports (its worker died) loses its
           lease after ``probe_lease_seconds`` and the next caller probes instead.

Each transition is one Lua script, so concurrent workers cannot both win the probe.
Time is passed in (wall-clock seconds, since workers on different machines share it).
Which failures count is the caller's decision; ``COUNTED_FAILURES`` is the usual choice:
the host is unreachable, not merely answering with an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

COUNTED_FAILURES = frozenset({"connect_error", "timeout", "dns_error"})

_BEFORE_REQUEST = """
local key, now = KEYS[1], tonumber(ARGV[1])
local state = redis.call('HGET', key, 'state')
if not state or state == 'closed' then
  return {'closed', 1, ''}
end
if state == 'open' then
  local retry_at = redis.call('HGET', key, 'retry_at')
  if now < tonumber(retry_at) then
    return {'open', 0, retry_at}
  end
else
  local probe_until = redis.call('HGET', key, 'probe_until')
  if now < tonumber(probe_until) then
    return {'half_open', 0, probe_until}
  end
end
-- Cooled down (or the previous probe's lease ran out): this caller is the probe.
redis.call('HSET', key, 'state', 'half_open',
           'probe_until', string.format('%.17g', now + tonumber(ARGV[2])))
redis.call('EXPIRE', key, ARGV[3])
return {'half_open', 1, ''}
"""

_RECORD_FAILURE = """
local key, now = KEYS[1], tonumber(ARGV[1])
local state = redis.call('HGET', key, 'state') or 'closed'
local retry_at = string.format('%.17g', now + tonumber(ARGV[3]))
if state == 'open' then
  return 'open'  -- late failures of deliveries sent before it opened change nothing
end
if state == 'half_open' then
  redis.call('HDEL', key, 'probe_until')
  redis.call('HSET', key, 'state', 'open', 'retry_at', retry_at)
else
  local failures = redis.call('HINCRBY', key, 'failures', 1)
  if failures >= tonumber(ARGV[2]) then
    redis.call('HSET', key, 'state', 'open', 'retry_at', retry_at)
  else
    redis.call('HSET', key, 'state', 'closed')
  end
end
redis.call('EXPIRE', key, ARGV[4])
return redis.call('HGET', key, 'state')
"""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    state: str  # closed | open | half_open
    retry_at: float | None  # when a held-back caller may ask again


@lru_cache(maxsize=8192)
def host_key(url: str) -> str:
    """The breaker key of a URL: ``host:port``, lowercased (kept per URL: a worker asks it
    for every run at admission and again when recording)."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    return f"{(parts.hostname or '').rstrip('.')}:{port}"


class CircuitBreaker:
    def __init__(
        self,
        redis_client,
        *,
        failure_threshold: int = 5,
        cooldown_seconds: float = 60.0,
        probe_lease_seconds: float = 60.0,
        state_ttl_seconds: int = 86400,
        key_prefix: str = "cronsvc:cb:",
    ) -> None:
        self._redis = redis_client
        self.failure_threshold = failure_threshold
        self.cooldown_seconds = cooldown_seconds
        self.probe_lease_seconds = probe_lease_seconds
        # Only garbage collection of hosts nobody delivers to any more.
        self.state_ttl_seconds = state_ttl_seconds
        self.key_prefix = key_prefix
        self._before_request = redis_client.register_script(_BEFORE_REQUEST)
        self._record_failure = redis_client.register_script(_RECORD_FAILURE)

    def _key(self, host: str) -> str:
        return self.key_prefix + host.lower()

    def before_request(self, host: str, now: float) -> Decision:
        state, allowed, retry_at = self._before_request(
            keys=[self._key(host)],
            args=[repr(float(now)), repr(float(self.probe_lease_seconds)), self.state_ttl_seconds],
        )
        return Decision(bool(allowed), _text(state), float(retry_at) if retry_at else None)

    def record_success(self, host: str) -> None:
        self._redis.delete(self._key(host))

    def record_failure(self, host: str, now: float) -> str:
        """Count a failure that says the host is unreachable; returns the new state."""
        state = self._record_failure(
            keys=[self._key(host)],
            args=[repr(float(now)), self.failure_threshold, repr(float(self.cooldown_seconds)),
                  self.state_ttl_seconds],
        )
        return _text(state)


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value
