"""Per-key quotas by plan, counted in Redis, with Retry-After and X-RateLimit-* headers."""

import pytest

from apps.api import throttling
from apps.plans.models import Plan
from tests.api.conftest import error_of

NOW = 1_900_000_040.0  # 20 s into a minute window (1_900_000_020 is a multiple of 60)


@pytest.fixture
def clock(monkeypatch):
    """Pins the throttle's clock: no test depends on the wall clock."""
    state = {"now": NOW}
    monkeypatch.setattr(throttling.PlanRateThrottle, "timer", lambda self: state["now"])
    return state


@pytest.fixture
def tiny_plan(tenant):
    pro = tenant.organization.plan
    plan = Plan.objects.create(**{f.name: getattr(pro, f.name) for f in Plan._meta.concrete_fields
                                  if f.name not in ("id", "code", "name", "created_at")},
                               code="tiny", name="Tiny")
    plan.api_requests_per_minute = 2
    plan.save()
    tenant.organization.plan = plan
    tenant.organization.save()
    return plan


def test_headers_then_429(api, tiny_plan, clock):
    first, second, third = (api.get("/api/v1/jobs/") for _ in range(3))
    assert (first.status_code, second.status_code, third.status_code) == (200, 200, 429)
    assert first["X-RateLimit-Limit"] == "2"
    assert (first["X-RateLimit-Remaining"], second["X-RateLimit-Remaining"]) == ("1", "0")
    reset = int(NOW) - int(NOW) % 60 + 60
    assert first["X-RateLimit-Reset"] == str(reset)
    assert third["Retry-After"] == "40"
    assert third["X-RateLimit-Remaining"] == "0"
    assert error_of(third)["code"] == "throttled"


def test_next_window_allows_again(api, tiny_plan, clock):
    for _ in range(3):
        api.get("/api/v1/jobs/")
    clock["now"] = NOW + 60
    response = api.get("/api/v1/jobs/")
    assert response.status_code == 200 and response["X-RateLimit-Remaining"] == "1"


def test_each_key_has_its_own_quota(api, tenant, tiny_plan, clock, make_key):
    _, other = make_key(tenant)
    for _ in range(3):
        api.get("/api/v1/jobs/")
    assert other.get("/api/v1/jobs/").status_code == 200


def test_writes_count_too(api, tiny_plan, clock):
    codes = [api.post("/api/v1/projects/", {"name": f"P{i}"}).status_code for i in range(3)]
    assert codes == [201, 201, 429]


def test_the_plan_sets_the_limit(api, tenant, clock):
    assert api.get("/api/v1/jobs/")["X-RateLimit-Limit"] == str(tenant.organization.plan.api_requests_per_minute)


def test_an_unreachable_cache_lets_requests_through(api, tiny_plan, clock, monkeypatch):
    class Broken:
        def add(self, *args, **kwargs):
            raise ConnectionError("redis is down")

    monkeypatch.setattr(throttling, "caches", {throttling.CACHE_ALIAS: Broken()})
    assert [api.get("/api/v1/jobs/").status_code for _ in range(3)] == [200, 200, 200]


@pytest.mark.parametrize("backend", ["redis", "memory"])
def test_a_window_counts_every_hit_and_expires(backend):
    """Both counting paths: one pipelined INCR+EXPIRE on Redis (the servers), add+incr on
    the embedded mode's memory cache."""
    from django.core.cache import caches
    from django.core.cache.backends.locmem import LocMemCache

    cache = caches[throttling.CACHE_ALIAS] if backend == "redis" else LocMemCache("throttle-test", {})
    assert isinstance(cache, throttling.RedisCache) == (backend == "redis")
    key = f"rl:test-{backend}:{id(cache)}"
    cache.delete(key)
    assert [throttling._incr(cache, key, timeout=60) for _ in range(3)] == [1, 2, 3]
    if backend == "redis":
        client = throttling._writer(cache)
        assert 0 < client.ttl(cache.make_and_validate_key(key)) <= 60  # the window ends
    cache.delete(key)
