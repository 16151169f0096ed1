"""Each plan limit at its boundary: at the limit allowed, one past refused with 402
plan_limit naming the limit and the cheapest plan that allows it."""

import pytest

from apps.jobs.models import Job
from apps.plans import limits
from apps.plans.models import Plan
from tests.api.conftest import error_of, job_body, key_client


def post(tenant, **overrides):
    return key_client(tenant.full_api_key).post("/api/v1/jobs/", job_body(tenant, **overrides))


def refusal(response):
    assert response.status_code == 402, response.json()
    error = error_of(response)
    assert error["code"] == "plan_limit"
    return error


def test_max_jobs_at_and_past_the_limit(make_tenant, make_job):
    free = make_tenant(plan="free")
    for _ in range(free.organization.plan.max_jobs - 1):
        make_job(free)
    assert post(free).status_code == 201  # the last one allowed
    error = refusal(post(free))
    assert (error["limit"], error["plan"]) == ("max_jobs", "pro")
    assert Job.objects.for_organization(free.organization).count() == free.organization.plan.max_jobs


@pytest.mark.parametrize("plan, locks", [("free", True), ("pro", True), ("enterprise", False)])
def test_creates_lock_the_organization_only_near_max_jobs(make_tenant, plan, locks):
    """Concurrent creates cannot overshoot max_jobs: within UNLOCKED_JOB_QUOTA_ROOM of it the
    organization row is locked while counting; far below it (enterprise: 1,000,000) it is not,
    so one organization's creates do not queue behind each other."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    tenant = make_tenant(plan=plan)
    with CaptureQueriesContext(connection) as queries:
        assert post(tenant).status_code == 201
    assert any("FOR UPDATE" in query["sql"] for query in queries.captured_queries) == locks


@pytest.mark.parametrize("seconds, status", [(3600, 201), (3599, 402)])
def test_min_interval_at_and_past_the_limit(make_tenant, seconds, status):
    free = make_tenant(plan="free")  # min_interval_seconds 3600
    response = post(free, schedule={"type": "interval", "seconds": seconds})
    assert response.status_code == status, response.json()
    if status == 402:
        error = refusal(response)
        assert (error["limit"], error["reason"], error["plan"]) == ("min_interval_seconds", "interval_too_short", "pro")


@pytest.mark.parametrize("timeout, status", [(60, 201), (61, 402)])
def test_max_timeout_at_and_past_the_limit(tenant, timeout, status):  # pro: 60 s
    response = post(tenant, request={"url": "https://example.com/", "timeout_seconds": timeout})
    assert response.status_code == status, response.json()
    if status == 402:
        assert (refusal(response)["limit"], refusal(response)["plan"]) == ("max_timeout_seconds", "business")


@pytest.mark.parametrize("attempts, status", [(5, 201), (6, 402)])
def test_max_attempts_at_and_past_the_limit(tenant, attempts, status):  # pro: 5
    response = post(tenant, retry={"max_attempts": attempts})
    assert response.status_code == status, response.json()
    if status == 402:
        error = refusal(response)
        assert (error["limit"], error["plan"]) == ("max_attempts", "business")
        assert "retry.max_attempts" in error["fields"]


def test_an_operators_plan_edit_moves_the_limit(tenant):
    plan = tenant.organization.plan
    plan.max_attempts = 6
    plan.save()
    assert post(tenant, retry={"max_attempts": 6}).status_code == 201


def test_no_plan_allows_it(db):
    from tests.conftest import ensure_seeded_plans

    ensure_seeded_plans()
    free = Plan.objects.get(code="free")
    with pytest.raises(limits.PlanLimit) as raised:
        limits.check_timeout(free, 10_000)
    assert raised.value.plan is None and raised.value.limit == "max_timeout_seconds"
