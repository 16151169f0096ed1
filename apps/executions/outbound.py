"""The outbound side of a worker process: address policy, HTTP session, shared guards.

One of each per process, built on first use, so connections are pooled across runs.
"""

import threading
import time
from functools import lru_cache

import redis
from django.conf import settings

from cronsvc.delivery.breaker import CircuitBreaker
from cronsvc.delivery.client import make_session
from cronsvc.delivery.guard import AddressPolicy, parse_networks, parse_ports
from cronsvc.delivery.limits import LeaseSemaphore, TokenBucket


def outbound_policy():
    return _policy(
        settings.OUTBOUND_ALLOW_PRIVATE,
        tuple(settings.OUTBOUND_ALLOWED_NETWORKS),
        settings.OUTBOUND_ALLOWED_PORTS,
    )


@lru_cache(maxsize=4)
def _policy(allow_private, networks, ports):
    return AddressPolicy(
        allow_private=allow_private,
        allowed_networks=parse_networks(",".join(networks)),
        allowed_ports=parse_ports(ports),
    )


@lru_cache(maxsize=4)
def _session(policy):
    return make_session(policy, pool_connections=200, pool_maxsize=20)


def http_session():
    return _session(outbound_policy())


@lru_cache(maxsize=1)
def redis_client():
    return redis.Redis.from_url(settings.REDIS_URL) if settings.REDIS_URL else None


class Guards:
    """Limits shared by every worker through Redis: the per-host circuit breaker, the
    per-organization concurrency cap and the per-job overlap lock."""

    def __init__(self, client):
        self.client = client
        self.breaker = CircuitBreaker(
            client,
            failure_threshold=settings.BREAKER_FAILURE_THRESHOLD,
            cooldown_seconds=settings.BREAKER_COOLDOWN_SECONDS,
        )

    def concurrency(self, organization_id, limit, lease_seconds):
        return LeaseSemaphore(self.client, f"cronsvc:concurrency:{organization_id}", limit, lease_seconds)

    def take_token(self, job_id, per_minute, now):
        """(allowed, seconds to wait) under the job's own rate limit."""
        bucket = TokenBucket(self.client, f"cronsvc:rate:{job_id}", per_minute / 60.0, 1)
        return bucket.take(now)

    def lock_job(self, job_id, holder, lease_seconds):
        return bool(self.client.set(f"cronsvc:running:{job_id}", holder, nx=True, ex=int(lease_seconds) + 1))

    def unlock_job(self, job_id, holder):
        key = f"cronsvc:running:{job_id}"
        if self.client.get(key) == holder.encode():
            self.client.delete(key)


class LocalGuards:
    """Embedded mode has one worker process and no Redis: the same limits, in memory.
    There is no circuit breaker across processes here."""

    breaker = None

    def __init__(self):
        self._lock = threading.Lock()
        self._held = {}
        self._jobs = {}
        self._next_token = {}

    def concurrency(self, organization_id, limit, lease_seconds):
        return _LocalSemaphore(self, organization_id, limit)

    def take_token(self, job_id, per_minute, now):
        with self._lock:
            next_free = self._next_token.get(job_id, 0.0)
            if now < next_free:
                return False, next_free - now
            self._next_token[job_id] = now + 60.0 / per_minute
            return True, 0.0

    def lock_job(self, job_id, holder, lease_seconds):
        with self._lock:
            if job_id in self._jobs:
                return False
            self._jobs[job_id] = holder
            return True

    def unlock_job(self, job_id, holder):
        with self._lock:
            if self._jobs.get(job_id) == holder:
                del self._jobs[job_id]


class _LocalSemaphore:
    def __init__(self, guards, key, limit):
        self.guards, self.key, self.limit = guards, key, limit

    def acquire(self, holder_id, now):
        with self.guards._lock:
            holders = self.guards._held.setdefault(self.key, set())
            if len(holders) >= self.limit:
                return False
            holders.add(holder_id)
            return True

    def release(self, holder_id):
        with self.guards._lock:
            self.guards._held.get(self.key, set()).discard(holder_id)


@lru_cache(maxsize=1)
def guards():
    client = redis_client()
    return Guards(client) if client is not None else LocalGuards()


def wall_clock():
    return time.time()
