"""Per-organization concurrency semaphore and token bucket on a real Redis."""

from __future__ import annotations

import threading
import uuid

import pytest
import redis

from cronsvc.delivery.limits import LeaseSemaphore, TokenBucket

T0 = 1_714_564_800.0


@pytest.fixture
def redis_client():
    client = redis.Redis(host="127.0.0.1", port=6379)
    prefix = f"test:delivery:limits:{uuid.uuid4().hex}:"
    client.prefix = prefix
    yield client
    for key in client.scan_iter(prefix + "*"):
        client.delete(key)
    client.close()


def run_together(count, action):
    barrier = threading.Barrier(count)
    results = []

    def worker(index):
        barrier.wait()
        results.append(action(index))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


# --- LeaseSemaphore -------------------------------------------------------------------------

@pytest.fixture
def semaphore(redis_client):
    return LeaseSemaphore(redis_client, redis_client.prefix + "org:1", limit=2, lease_seconds=30)


def test_the_cap_holds(semaphore):
    assert semaphore.acquire("a", T0)
    assert semaphore.acquire("b", T0)
    assert not semaphore.acquire("c", T0)
    assert semaphore.holders(T0) == 2


def test_release_frees_a_slot(semaphore):
    semaphore.acquire("a", T0)
    semaphore.acquire("b", T0)
    semaphore.release("a")
    assert semaphore.acquire("c", T0 + 1)
    assert not semaphore.acquire("d", T0 + 1)


def test_acquiring_again_renews_rather_than_taking_a_second_slot(semaphore):
    assert semaphore.acquire("a", T0)
    assert semaphore.acquire("a", T0 + 20)  # now held until T0 + 50
    assert semaphore.holders(T0 + 20) == 1
    assert semaphore.holders(T0 + 45) == 1  # without the renewal it lapsed at T0 + 30
    assert semaphore.acquire("b", T0 + 45)
    assert not semaphore.acquire("c", T0 + 45)


def test_leases_of_dead_workers_expire(semaphore):
    semaphore.acquire("dead-1", T0)
    semaphore.acquire("dead-2", T0 + 5)
    assert not semaphore.acquire("live", T0 + 29)
    assert semaphore.acquire("live", T0 + 30)  # dead-1's lease ended at T0 + 30
    assert not semaphore.acquire("other", T0 + 34)
    assert semaphore.acquire("other", T0 + 35)


def test_renew_only_what_is_still_held(semaphore):
    semaphore.acquire("a", T0)
    assert semaphore.renew("a", T0 + 29)
    assert semaphore.holders(T0 + 58) == 1
    assert not semaphore.renew("a", T0 + 59)  # lapsed at T0 + 59
    assert not semaphore.renew("never", T0)
    assert semaphore.holders(T0 + 59) == 0


def test_the_limit_holds_under_concurrency(semaphore):
    granted = run_together(20, lambda i: semaphore.acquire(f"worker-{i}", T0))
    assert sum(granted) == 2


def test_the_key_expires(semaphore, redis_client):
    semaphore.acquire("a", T0)
    assert 0 < redis_client.ttl(semaphore.key) <= 30 + 60


# --- TokenBucket ----------------------------------------------------------------------------------

@pytest.fixture
def bucket(redis_client):
    return TokenBucket(redis_client, redis_client.prefix + "org:1:rate", rate_per_second=2, burst=3)


def test_a_full_bucket_allows_a_burst(bucket):
    assert [bucket.take(T0)[0] for _ in range(4)] == [True, True, True, False]


def test_the_wait_says_when_a_token_is_back(bucket):
    for _ in range(3):
        bucket.take(T0)
    allowed, wait = bucket.take(T0)
    assert not allowed and wait == pytest.approx(0.5)
    allowed, wait = bucket.take(T0 + 0.25)
    assert not allowed and wait == pytest.approx(0.25)
    assert bucket.take(T0 + 0.5) == (True, 0.0)


def test_tokens_refill_at_the_rate_up_to_the_burst(bucket):
    for _ in range(3):
        bucket.take(T0)
    assert [bucket.take(T0 + 1)[0] for _ in range(3)] == [True, True, False]  # 2 per second
    assert [bucket.take(T0 + 100)[0] for _ in range(4)] == [True, True, True, False]  # capped


def test_a_clock_running_behind_does_not_mint_tokens(bucket):
    for _ in range(3):
        bucket.take(T0 + 10)
    assert not bucket.take(T0)[0]
    assert not bucket.take(T0 + 10.1)[0]
    assert bucket.take(T0 + 10.5)[0]


def test_the_burst_holds_under_concurrency(bucket):
    results = run_together(20, lambda i: bucket.take(T0)[0])
    assert sum(results) == 3


def test_invalid_buckets(redis_client):
    with pytest.raises(ValueError):
        TokenBucket(redis_client, "k", rate_per_second=0, burst=1)
    with pytest.raises(ValueError):
        TokenBucket(redis_client, "k", rate_per_second=1, burst=0)
