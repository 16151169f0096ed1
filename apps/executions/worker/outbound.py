"""The outbound side of a worker process: address policy, HTTP session, shared guards.

One of each per process, built on first use, so connections are pooled across runs. A
forked process (a prefork pool's child) forgets its parent's and builds its own: pooled
sockets shared by two processes would interleave their requests and answers. The web's
test runs and the notifications send through the same session (``send``).

A worker admits and settles the runs of a batch together: ``Guards``' ``*_many`` methods
run the engine's Redis scripts (``cronsvc.delivery.limits`` and ``.breaker``) for every run
of the batch in one pipeline, one round trip instead of one per run and check. Redis runs
a pipeline's scripts one after the other, so the outcome is that of the engine's single
calls in the same order; ``LocalGuards`` (embedded mode, no Redis) is exactly that loop.
The engine has no batch form of these calls yet, so the methods pass its scripts the
arguments its single calls pass: a change to those scripts must be made here too (the
tests in tests/delivery exercise every path).
"""

import os
import threading
import time
from functools import cached_property, lru_cache

from django.conf import settings

from cronsvc.delivery import breaker as breaker_scripts
from cronsvc.delivery import guard
from cronsvc.delivery import limits as limit_scripts
from cronsvc.delivery.aio import AsyncSession, StaticResolver, deliver, hosts_file, loop_thread
from cronsvc.delivery.breaker import CircuitBreaker, Decision
from cronsvc.delivery.limits import LeaseSemaphore, TokenBucket, lease_key_ttl

from ..shared_redis import redis_client


def outbound_policy():
    """The one outbound policy (cronsvc.delivery.guard.outbound_policy), as every surface has it."""
    return guard.outbound_policy(settings)


def delivery_loop():
    """This process's event loop thread, where its requests are sent."""
    return loop_thread(settings.DELIVERY_EVENT_LOOP)


def http_session():
    """The delivery loop's pooled session (made on the loop's thread, on first use), one
    per combination of the settings it is built from, so a changed setting (a test's) gets
    its own. Call it from any thread but the loop's."""
    policy, hosts = outbound_policy(), settings.DELIVERY_HOSTS_FILE
    max_per_host, ca_bundle = settings.DELIVERY_MAX_CONNECTIONS_PER_HOST, settings.DELIVERY_CA_BUNDLE or None

    def make():
        resolver = StaticResolver(hosts_file(hosts)) if hosts else None
        return AsyncSession(policy, limit=0, ca_bundle=ca_bundle, max_per_host=max_per_host, resolver=resolver)

    return delivery_loop().session((policy, max_per_host, ca_bundle, hosts), make)


def send(prepared, *, max_body_bytes):
    """Send ``prepared`` from blocking code (a web view, a notification task) on this
    process's delivery loop, under the one outbound policy, and wait for its result."""
    return deliver(prepared, session=http_session(), policy=outbound_policy(), max_body_bytes=max_body_bytes)


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
        return LeaseSemaphore(self.client, self.concurrency_key(organization_id), limit, lease_seconds)

    def take_token(self, job_id, per_minute, now):
        """(allowed, seconds to wait) under the job's own rate limit."""
        bucket = TokenBucket(self.client, f"cronsvc:rate:{job_id}", per_minute / 60.0, 1)
        return bucket.take(now)

    def lock_job(self, job_id, holder, lease_seconds):
        return bool(self.client.set(f"cronsvc:running:{job_id}", holder, nx=True, ex=int(lease_seconds) + 1))

    def unlock_job(self, job_id, holder):
        self.settle_many(unlocks=[(job_id, holder)])

    # --- the same, for many runs in one round trip ---------------------------------------

    def lock_jobs(self, requests):
        """[(job_id, holder, lease_seconds)] -> [locked?]"""
        pipe = self.client.pipeline(transaction=False)
        for job_id, holder, lease_seconds in requests:
            pipe.set(f"cronsvc:running:{job_id}", holder, nx=True, ex=int(lease_seconds) + 1)
        return [bool(done) for done in pipe.execute()]

    def acquire_many(self, requests, now):
        """[(organization_id, limit, lease_seconds, holder)] -> [slot taken?]: the
        organizations' concurrency caps (``LeaseSemaphore.acquire``), one script call per
        organization for its runs in order."""
        per_org = {}
        for index, (organization_id, limit, lease_seconds, holder) in enumerate(requests):
            per_org.setdefault(organization_id, []).append((index, limit, lease_seconds, holder))
        pipe = self.client.pipeline(transaction=False)
        for organization_id, runs in per_org.items():
            limit = runs[0][1]
            ttl = max(lease_key_ttl(lease) for _, _, lease, _ in runs)
            args = [repr(float(now)), limit, ttl]
            for _, _, lease_seconds, holder in runs:
                args += [holder, repr(float(lease_seconds))]
            self._acquire_many(keys=[self.concurrency_key(organization_id)], client=pipe, args=args)
        taken = [False] * len(requests)
        for runs, answers in zip(per_org.values(), pipe.execute()):
            for (index, *_), answer in zip(runs, answers):
                taken[index] = bool(answer)
        return taken

    def circuit_many(self, hosts, now):
        """[host] -> [Decision] (``CircuitBreaker.before_request``), one per run, asking
        Redis once per distinct host: in a half-open circuit only the first run of the host
        gets to probe it, the others wait as they would behind another worker's probe."""
        breaker = self.breaker
        distinct = list(dict.fromkeys(hosts))
        pipe = self.client.pipeline(transaction=False)
        for host in distinct:
            self._before_request(keys=[breaker._key(host)], client=pipe, args=[
                repr(float(now)), repr(float(breaker.probe_lease_seconds)), breaker.state_ttl_seconds])
        first = {host: Decision(bool(allowed), _text(state), float(retry_at) if retry_at else None)
                 for host, (state, allowed, retry_at) in zip(distinct, pipe.execute())}
        decisions, probing = [], set()
        for host in hosts:
            decision = first[host]
            if decision.allowed and decision.state == "half_open":
                if host in probing:
                    decision = Decision(False, "half_open", now + breaker.probe_lease_seconds)
                probing.add(host)
            decisions.append(decision)
        return decisions

    def take_tokens(self, requests, now):
        """[(job_id, per_minute[, burst])] -> [(allowed, seconds to wait)] (``take_token``);
        the burst defaults to 1 (a job's own rate is smooth)."""
        pipe = self.client.pipeline(transaction=False)
        for job_id, per_minute, *burst in requests:
            bucket = TokenBucket(self.client, f"cronsvc:rate:{job_id}", per_minute / 60.0, burst[0] if burst else 1)
            self._take(keys=[bucket.key], client=pipe, args=[
                repr(float(now)), repr(float(bucket.rate_per_second)), bucket.burst, bucket._key_ttl()])
        return [(bool(allowed), float(wait)) for allowed, wait in pipe.execute()]

    def settle_many(self, *, successes=(), failures=(), releases=(), unlocks=(), now=0.0):
        """After a group of runs is recorded: close the circuits of hosts that answered
        (``successes``: [host]), count the failures that say a host is unreachable
        (``failures``: [host]), give back the organizations' slots (``releases``:
        [(organization_id, holder)]) and the jobs' overlap locks (``unlocks``: [(job_id,
        holder)], each only while ``holder`` still holds it), in one round trip."""
        if not (successes or failures or releases or unlocks):
            return
        breaker = self.breaker
        pipe = self.client.pipeline(transaction=False)
        for host in dict.fromkeys(successes):
            pipe.delete(breaker._key(host))  # CircuitBreaker.record_success
        for host in failures:
            self._record_failure(keys=[breaker._key(host)], client=pipe, args=[
                repr(float(now)), breaker.failure_threshold, repr(float(breaker.cooldown_seconds)),
                breaker.state_ttl_seconds])
        per_org = {}
        for organization_id, holder in releases:
            per_org.setdefault(organization_id, []).append(holder)
        for organization_id, holders in per_org.items():
            pipe.zrem(self.concurrency_key(organization_id), *holders)  # LeaseSemaphore.release
        for job_id, holder in unlocks:
            # compare and delete in one step: a lock that expired and was taken by another
            # run meanwhile is left to its new holder
            self._unlock(keys=[f"cronsvc:running:{job_id}"], args=[holder], client=pipe)
        pipe.execute()

    @staticmethod
    def concurrency_key(organization_id):
        return f"cronsvc:concurrency:{organization_id}"

    @cached_property
    def _acquire_many(self):
        return self.client.register_script(limit_scripts._ACQUIRE_MANY)

    @cached_property
    def _unlock(self):
        return self.client.register_script(_UNLOCK)

    @cached_property
    def _take(self):
        return self.client.register_script(limit_scripts._TAKE)

    @cached_property
    def _before_request(self):
        return self.client.register_script(breaker_scripts._BEFORE_REQUEST)

    @cached_property
    def _record_failure(self):
        return self.client.register_script(breaker_scripts._RECORD_FAILURE)


# A job's overlap lock (``lock_job``) removed only by its holder.
_UNLOCK = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


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

    def take_token(self, job_id, per_minute, now, burst=1):
        """The same token bucket as the Redis script, in this process's memory."""
        rate = per_minute / 60.0
        with self._lock:
            tokens, at = self._next_token.get(job_id, (float(burst), now))
            tokens = min(burst, tokens + max(0.0, now - at) * rate)
            allowed = tokens >= 1
            self._next_token[job_id] = (tokens - 1 if allowed else tokens, max(at, now))
            return (True, 0.0) if allowed else (False, (1 - tokens) / rate)

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

    def lock_jobs(self, requests):
        return [self.lock_job(*request) for request in requests]

    def acquire_many(self, requests, now):
        return [self.concurrency(organization_id, limit, lease).acquire(holder, now)
                for organization_id, limit, lease, holder in requests]

    def circuit_many(self, hosts, now):
        return [Decision(True, "closed", None) for _ in hosts]

    def take_tokens(self, requests, now):
        return [self.take_token(job_id, per_minute, now, *burst) for job_id, per_minute, *burst in requests]

    def settle_many(self, *, successes=(), failures=(), releases=(), unlocks=(), now=0.0):
        for organization_id, holder in releases:
            _LocalSemaphore(self, organization_id, 0).release(holder)
        for job_id, holder in unlocks:
            self.unlock_job(job_id, holder)


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


def _forget_parent_clients():
    """In a forked child: drop the parent's guards (built again on first use; the parent's
    delivery loop and its pooled sessions are dropped by ``cronsvc.delivery.aio``). The
    parent's sockets are only dereferenced here, never shut down, so the parent keeps
    using them."""
    guards.cache_clear()


os.register_at_fork(after_in_child=_forget_parent_clients)


def _text(value):
    return value.decode() if isinstance(value, bytes) else value
