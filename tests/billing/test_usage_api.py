"""GET /api/v1/usage/: owners and admins read their own organization's usage."""

from datetime import date, timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import Membership
from apps.billing.usage import project
from apps.executions.models import UsageDay, UsageMonth
from tests.api.conftest import key_client, member_client  # noqa: F401 (fixture)
from tests.conftest import utc


def test_usage_shows_runs_quota_cost_and_history(tenant, other_tenant):
    today = timezone.now().date()
    month = today.replace(day=1)
    plan = tenant.organization.plan  # pro: 500,000 runs, then 50 cents per 1,000
    UsageMonth.objects.create(organization=tenant.organization, month=month, runs=501_001)
    UsageDay.objects.create(organization=tenant.organization, day=today, runs=7, succeeded=5, failed=2)
    UsageDay.objects.create(organization=tenant.organization, day=today - timedelta(days=90), runs=99)  # too old
    UsageMonth.objects.create(organization=other_tenant.organization, month=month, runs=3)

    body = key_client(tenant.full_api_key).get("/api/v1/usage/").json()
    assert (body["runs"], body["quota"], body["plan"]["code"]) == (501_001, 500_000, "pro")
    assert (body["overage_runs"], body["overage_cents"]) == (1_001, 2 * plan.overage_cents_per_1000)
    assert body["cost_cents"] == plan.monthly_price_cents + 100
    assert body["projected_runs"] >= 501_001
    assert len(body["days"]) == 90
    assert body["days"][-1] == {"day": today.isoformat(), "runs": 7, "succeeded": 5, "failed": 2}
    assert body["days"][0]["day"] == (today - timedelta(days=89)).isoformat() and body["days"][0]["runs"] == 0
    assert body["month"] == month.isoformat()


@pytest.mark.parametrize("role, status", [("owner", 200), ("admin", 200), ("developer", 403), ("viewer", 403)])
def test_only_owners_and_admins_read_usage(tenant, member_client, role, status):
    response = member_client(tenant, getattr(Membership.Role, role.upper())).get("/api/v1/usage/")
    assert response.status_code == status
    if status == 403:
        assert response.json()["error"]["code"] == "permission_denied"


def test_usage_needs_authentication(client, db):
    assert client.get("/api/v1/usage/").status_code == 401


def test_projection_scales_the_elapsed_part_of_the_month():
    assert project(100, date(2030, 4, 1), utc(2030, 4, 16)) == 200  # half of a 30-day month
    assert project(100, date(2030, 4, 1), utc(2030, 4, 1, 0, 10)) == 72_000  # first hour: scaled from an hour
    assert project(0, date(2030, 4, 1), utc(2030, 4, 20)) == 0


def test_usage_is_in_the_openapi_schema(db):
    from django.urls import path
    from drf_spectacular.generators import SchemaGenerator

    from apps.billing.api import UsageView

    schema = SchemaGenerator(patterns=[path("api/v1/usage/", UsageView.as_view())]).get_schema(public=True)
    operation = schema["paths"]["/api/v1/usage/"]["get"]
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Usage"}
    assert "Owners and admins" in operation["description"]
    usage = schema["components"]["schemas"]["Usage"]["properties"]
    assert {"runs", "quota", "projected_runs", "cost_cents", "days"} <= set(usage)
