"""The per-host circuit breaker on a real Redis, shared by concurrent callers."""

from __future__ import annotations

import threading
import uuid

import pytest
import redis

from cronsvc.delivery.breaker import COUNTED_FAILURES, CircuitBreaker, Decision, host_key

HOST = "api.example.com:443"
T0 = 1_714_564_800.25


@pytest.fixture
def redis_client():
    client = redis.Redis(host="127.0.0.1", port=6379)
    prefix = f"test:delivery:breaker:{uuid.uuid4().hex}:"
    client.prefix = prefix
    yield client
    for key in client.scan_iter(prefix + "*"):
        client.delete(key)
    client.close()


@pytest.fixture
def breaker(redis_client):
    return CircuitBreaker(redis_client, failure_threshold=3, cooldown_seconds=60,
                          probe_lease_seconds=30, key_prefix=redis_client.prefix)


def open_breaker(breaker, now=T0):
    for _ in range(breaker.failure_threshold):
        breaker.record_failure(HOST, now)


def test_closed_lets_everything_through(breaker):
    assert breaker.before_request(HOST, T0) == Decision(True, "closed", None)


def test_opens_at_the_threshold_of_consecutive_failures(breaker):
    assert breaker.record_failure(HOST, T0) == "closed"
    assert breaker.record_failure(HOST, T0 + 1) == "closed"
    assert breaker.before_request(HOST, T0 + 1).allowed
    assert breaker.record_failure(HOST, T0 + 2) == "open"
    assert breaker.before_request(HOST, T0 + 3) == Decision(False, "open", T0 + 2 + 60)


def test_a_success_resets_the_count(breaker):
    breaker.record_failure(HOST, T0)
    breaker.record_failure(HOST, T0)
    breaker.record_success(HOST)
    breaker.record_failure(HOST, T0)
    breaker.record_failure(HOST, T0)
    assert breaker.before_request(HOST, T0).state == "closed"


def test_hosts_are_independent(breaker):
    open_breaker(breaker)
    assert breaker.before_request("other.example.com:443", T0).allowed
    assert not breaker.before_request(HOST.upper(), T0).allowed  # host names are case-blind


def test_late_failures_while_open_do_not_extend_the_cooldown(breaker):
    open_breaker(breaker)
    assert breaker.record_failure(HOST, T0 + 50) == "open"
    assert breaker.before_request(HOST, T0 + 59).retry_at == T0 + 60


def test_after_the_cooldown_exactly_one_caller_probes(breaker):
    open_breaker(breaker)
    assert not breaker.before_request(HOST, T0 + 59.9).allowed
    probe = breaker.before_request(HOST, T0 + 60)
    assert probe == Decision(True, "half_open", None)
    held = breaker.before_request(HOST, T0 + 61)
    assert held == Decision(False, "half_open", T0 + 60 + 30)


def test_a_single_probe_under_concurrency(breaker, redis_client):
    open_breaker(breaker)
    barrier = threading.Barrier(20)
    decisions = []

    def caller():
        barrier.wait()
        decisions.append(breaker.before_request(HOST, T0 + 120))

    threads = [threading.Thread(target=caller) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(d.allowed for d in decisions) == 1
    assert {d.state for d in decisions} == {"half_open"}


def test_a_successful_probe_closes(breaker):
    open_breaker(breaker)
    assert breaker.before_request(HOST, T0 + 60).allowed
    breaker.record_success(HOST)
    assert breaker.before_request(HOST, T0 + 61) == Decision(True, "closed", None)
    assert breaker.record_failure(HOST, T0 + 62) == "closed"  # counting starts over


def test_a_failed_probe_reopens_with_a_fresh_cooldown(breaker):
    open_breaker(breaker)
    assert breaker.before_request(HOST, T0 + 70).allowed
    assert breaker.record_failure(HOST, T0 + 75) == "open"
    assert breaker.before_request(HOST, T0 + 100) == Decision(False, "open", T0 + 75 + 60)
    assert breaker.before_request(HOST, T0 + 135).allowed  # the next probe


def test_a_probe_that_never_reports_loses_its_lease(breaker):
    open_breaker(breaker)
    assert breaker.before_request(HOST, T0 + 60).allowed  # this worker dies
    assert not breaker.before_request(HOST, T0 + 89).allowed
    assert breaker.before_request(HOST, T0 + 90).allowed  # lease of 30 s ran out
    assert not breaker.before_request(HOST, T0 + 91).allowed


def test_state_keys_expire(breaker, redis_client):
    breaker.record_failure(HOST, T0)
    assert 0 < redis_client.ttl(redis_client.prefix + HOST.lower()) <= 86400


def test_host_key_and_counted_failures():
    assert host_key("https://API.example.com./x") == "api.example.com:443"
    assert host_key("http://example.com:8080/") == "example.com:8080"
    assert COUNTED_FAILURES == {"connect_error", "timeout", "dns_error"}
