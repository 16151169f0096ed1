"""Retry rules, full-jitter backoff and Retry-After."""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronsvc.delivery.outcome import Outcome
from cronsvc.delivery.retry import (
    RetryPolicy,
    backoff_cap,
    next_delay,
    parse_retry_after,
    should_retry,
)

POLICY = RetryPolicy(max_attempts=5)
NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def failed(kind):
    return Outcome(False, kind, kind)


@pytest.mark.parametrize("kind, status, expected", [
    ("http_5xx", 500, True), ("http_5xx", 503, True),
    ("http_4xx", 408, True), ("http_4xx", 425, True), ("http_4xx", 429, True),
    ("http_4xx", 400, False), ("http_4xx", 401, False), ("http_4xx", 404, False), ("http_4xx", 422, False),
    ("connect_error", None, True), ("dns_error", None, True),
    ("timeout", None, False),
    ("body_mismatch", 200, True),
    ("circuit_open", None, True),
    ("tls_error", None, False), ("forbidden_target", None, False),
    ("http_3xx", 302, False), ("unexpected_status", 204, False),
])
def test_what_is_retried(kind, status, expected):
    assert should_retry(failed(kind), status, 1, POLICY) is expected


def test_timeouts_only_when_the_job_opts_in():
    assert should_retry(failed("timeout"), None, 1, RetryPolicy(retry_on_timeout=True))
    assert not should_retry(failed("timeout"), None, 1, RetryPolicy(retry_on_timeout=False))


def test_success_is_never_retried():
    assert not should_retry(Outcome(True, None, "HTTP 200"), 200, 1, POLICY)


def test_never_past_max_attempts():
    policy = RetryPolicy(max_attempts=3)
    assert should_retry(failed("http_5xx"), 500, 2, policy)
    assert not should_retry(failed("http_5xx"), 500, 3, policy)
    assert not should_retry(failed("http_5xx"), 500, 4, policy)
    assert not should_retry(failed("http_5xx"), 500, 1, RetryPolicy(max_attempts=1))


def test_the_backoff_cap_grows_exponentially_up_to_max_delay():
    policy = RetryPolicy(initial_delay=10, multiplier=2, max_delay=100)
    assert [backoff_cap(a, policy) for a in range(1, 7)] == [10, 20, 40, 80, 100, 100]
    assert backoff_cap(10_000, policy) == 100  # no overflow


@given(
    attempt=st.integers(1, 200),
    initial=st.floats(0.1, 600),
    multiplier=st.floats(1.0, 10.0),
    max_delay=st.floats(1.0, 86400),
    seed=st.integers(),
)
def test_full_jitter_stays_between_zero_and_the_cap(attempt, initial, multiplier, max_delay, seed):
    policy = RetryPolicy(initial_delay=initial, multiplier=multiplier, max_delay=max_delay)
    delay = next_delay(attempt, policy, retry_after=None, rng=random.Random(seed))
    assert 0.0 <= delay <= min(max_delay, initial * multiplier ** min(attempt - 1, 1000))


def test_full_jitter_spreads_over_the_whole_range():
    policy = RetryPolicy(initial_delay=10, multiplier=2, max_delay=3600)
    rng = random.Random(7)
    delays = [next_delay(3, policy, retry_after=None, rng=rng) for _ in range(2000)]
    assert min(delays) < 2 and max(delays) > 38  # cap is 40
    assert 18 < sum(delays) / len(delays) < 22


@given(st.floats(0, 10**7))
def test_retry_after_overrides_the_backoff_capped_by_max_delay(retry_after):
    policy = RetryPolicy(max_delay=3600)
    delay = next_delay(1, policy, retry_after=retry_after, rng=random.Random(0))
    assert delay == min(retry_after, 3600)


def test_retry_after_in_seconds():
    assert parse_retry_after("120", NOW) == 120.0
    assert parse_retry_after(" 0 ", NOW) == 0.0


def test_retry_after_as_an_http_date():
    later = format_datetime(NOW + timedelta(seconds=90), usegmt=True)
    assert later == "Wed, 01 May 2024 12:01:30 GMT"
    assert parse_retry_after(later, NOW) == 90.0
    assert parse_retry_after("Wed, 01 May 2024 11:00:00 GMT", NOW) == 0.0  # in the past


@pytest.mark.parametrize("value", [None, "", "soon", "-5", "1.5", "²", "Wed, 99 May 2024 12:00:00 GMT"])
def test_unusable_retry_after(value):
    assert parse_retry_after(value, NOW) is None


def test_retry_after_from_a_response_feeds_next_delay():
    policy = RetryPolicy(max_delay=60)
    wait = parse_retry_after("Wed, 01 May 2024 12:00:30 GMT", NOW)
    assert next_delay(2, policy, retry_after=wait, rng=random.Random(0)) == 30.0
    assert next_delay(2, policy, retry_after=parse_retry_after("7200", NOW), rng=random.Random(0)) == 60
