"""The API key cache (apps/api/keycache.py): a key this process has read costs no
database query, and every change that decides whether it may authenticate is seen at once,
by this process and (through the stamps in Redis) by every other one.

"Another process" is simulated by putting this process's entry back after a change: that is
exactly the state of a web process that had the key cached and did not make the change
itself. tests/api/test_keycache_processes.py does the same with a real web process."""

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.accounts import services
from apps.api import keycache, throttling
from apps.plans.models import Plan
from tests.api.conftest import error_of, key_client


@pytest.fixture(autouse=True)
def _fresh_cache():
    assert keycache.enabled(), "these tests need the Redis-backed api cache (REDIS_URL)"
    keycache.clear()
    yield
    keycache.clear()


def _lookup(tenant):
    return tenant.api_key.lookup


def _as_another_process(lookup, entry):
    """This process forgets what it learnt from its own change and holds the old entry."""
    keycache._entries[lookup] = entry


def _cached(api, tenant):
    assert api.get("/api/v1/projects/").status_code == 200
    entry = keycache._entries[_lookup(tenant)]
    return entry


def test_a_known_key_reads_no_key_row(tenant, api, make_job):
    job = make_job(tenant)
    api.get(f"/api/v1/jobs/{job.pk}/")  # first use: read from the database and remembered
    with CaptureQueriesContext(connection) as queries:
        response = api.get(f"/api/v1/jobs/{job.pk}/")
    assert response.status_code == 200
    assert not [q for q in queries.captured_queries if "accounts_apikey" in q["sql"]], queries.captured_queries
    assert len(queries.captured_queries) == 1  # the job


def test_revocation_elsewhere_is_seen_by_the_next_request(tenant, api):
    entry = _cached(api, tenant)
    services.revoke_api_key(tenant.api_key)
    _as_another_process(_lookup(tenant), entry)
    response = api.get("/api/v1/projects/")
    assert response.status_code == 401
    assert error_of(response)["code"] == "invalid_api_key"


def test_suspension_elsewhere_is_seen_by_the_next_request(tenant, api):
    entry = _cached(api, tenant)
    services.suspend_organization(tenant.organization, reason="abuse")
    _as_another_process(_lookup(tenant), entry)
    assert api.get("/api/v1/projects/").status_code == 401


def test_expiry_is_checked_on_every_request(tenant, make_key, monkeypatch):
    key, client = make_key(tenant, expires_at=timezone.now() + timezone.timedelta(hours=1))
    assert client.get("/api/v1/projects/").status_code == 200
    later = timezone.now() + timezone.timedelta(hours=2)
    monkeypatch.setattr(timezone, "now", lambda: later)
    assert client.get("/api/v1/projects/").status_code == 401


def test_deleting_the_key_elsewhere_is_seen(tenant, api):
    entry = _cached(api, tenant)
    tenant.api_key.delete()
    _as_another_process(_lookup(tenant), entry)
    assert api.get("/api/v1/projects/").status_code == 401


def test_a_plan_edit_elsewhere_applies_its_new_rate_limit(tenant, api):
    entry = _cached(api, tenant)
    plan = Plan.objects.get(pk=tenant.organization.plan_id)
    plan.api_requests_per_minute = 7
    plan.save()
    _as_another_process(_lookup(tenant), entry)
    assert api.get("/api/v1/projects/")["X-RateLimit-Limit"] == "7"


def test_a_plan_change_elsewhere_applies_the_new_plan(tenant, api):
    entry = _cached(api, tenant)
    services.change_plan(tenant.organization, Plan.objects.get(code="enterprise"))
    _as_another_process(_lookup(tenant), entry)
    enterprise = Plan.objects.get(code="enterprise").api_requests_per_minute
    assert api.get("/api/v1/projects/")["X-RateLimit-Limit"] == str(enterprise)


def test_wrong_secret_with_a_cached_lookup_is_refused_and_not_counted(tenant, api):
    first = api.get("/api/v1/projects/")
    full = tenant.full_api_key
    forged = full[:-1] + ("A" if full[-1] != "A" else "B")
    for _ in range(3):
        response = key_client(forged).get("/api/v1/projects/")
        assert response.status_code == 401
        assert error_of(response)["code"] == "invalid_api_key"
    second = api.get("/api/v1/projects/")
    # Only the two real requests were counted: a caller who knows the visible prefix cannot
    # spend the key's quota.
    assert int(first["X-RateLimit-Remaining"]) - int(second["X-RateLimit-Remaining"]) == 1


def test_each_request_is_counted_once_on_a_hit(tenant, api):
    remaining = [int(api.get("/api/v1/projects/")["X-RateLimit-Remaining"]) for _ in range(4)]
    assert remaining == [remaining[0] - n for n in range(4)]


def _unavailable(*args, **kwargs):
    raise ConnectionError("redis down")


def test_redis_failure_on_a_hit_falls_back_to_the_database(tenant, api, monkeypatch):
    entry = _cached(api, tenant)
    services.revoke_api_key(tenant.api_key)
    _as_another_process(_lookup(tenant), entry)  # a process that cannot see the new stamps
    monkeypatch.setattr("apps.api.keycache.count_and_read", _unavailable)
    assert api.get("/api/v1/projects/").status_code == 401


def test_redis_failure_on_a_miss_reads_the_database(tenant, api, monkeypatch):
    class Down:
        mget = pipeline = staticmethod(_unavailable)

    monkeypatch.setattr("apps.api.keycache.redis_client", lambda: Down())
    assert api.get("/api/v1/projects/").status_code == 200
    assert _lookup(tenant) not in keycache._entries  # nothing remembered without its stamps


def test_requests_do_not_share_the_cached_objects(tenant, api):
    entry = _cached(api, tenant)
    copy = keycache._detached(entry.api_key)
    copy.organization.plan = None
    copy.organization.name = "changed by a request"
    assert entry.api_key.organization.plan is not None
    assert entry.api_key.organization.name == tenant.organization.name


def test_last_use_is_written_once_per_resolution(tenant, api):
    api.get("/api/v1/projects/")
    with CaptureQueriesContext(connection) as queries:
        api.get("/api/v1/projects/")
    assert not [q for q in queries.captured_queries if q["sql"].startswith("UPDATE")]


def test_entries_expire(tenant, api, monkeypatch):
    entry = _cached(api, tenant)
    monkeypatch.setattr(keycache, "_clock", lambda: entry.loaded_at + keycache.MAX_AGE + 1)
    with CaptureQueriesContext(connection) as queries:
        assert api.get("/api/v1/projects/").status_code == 200
    assert [q for q in queries.captured_queries if "accounts_apikey" in q["sql"]]


def test_count_and_read_counts_like_count_hit():
    ident = f"cr-test-{uuid.uuid4().hex}"
    cache = throttling.caches[throttling.CACHE_ALIAS]
    stamp = cache.make_and_validate_key("test-stamp-present")
    throttling.redis_client().set(stamp, "5", ex=60)
    missing = cache.make_and_validate_key("test-stamp-missing")
    first, values = throttling.count_and_read(ident, 10, [missing, stamp], window=60, now=1_900_000_000.0)
    second, _ = throttling.count_and_read(ident, 10, [], window=60, now=1_900_000_001.0)
    assert values == [None, b"5"]
    assert (first.count, second.count, first.limit) == (1, 2, 10)
    third, trailing = throttling.count_and_read(ident, 10, [stamp, missing], window=60, now=1_900_000_002.0)
    assert trailing == [b"5", None] and third.count == 3
