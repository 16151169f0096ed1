"""Settings › Plan & usage reads the meter; statements are owners' pages, tenant-scoped."""

from datetime import date

from django.utils import timezone

from apps.accounts.services import change_plan
from apps.billing.models import Statement
from apps.executions.models import UsageDay, UsageMonth
from apps.plans.models import Plan
from tests.web.conftest import _private_web_counters, web_client  # noqa: F401 (fixtures)


def page(response):
    assert response.status_code == 200
    return response.content.decode()


def test_the_plan_page_shows_the_meter_cost_and_history(tenant, web_client):
    today = timezone.now().date()
    UsageMonth.objects.create(organization=tenant.organization, month=today.replace(day=1), runs=501_000)
    UsageDay.objects.create(organization=tenant.organization, day=today, runs=1234, succeeded=1200, failed=34)
    html = page(web_client(tenant).get("/settings/plan/"))
    assert "<strong>501000</strong> of 500000" in html
    assert 'id="projected-runs"' in html and 'id="usage-cost"' in html
    assert "USD 19.50" in html  # 19.00 plan + one started 1,000 past the quota at 0.50
    assert "1234" in html and today.strftime("%Y-%m-%d") in html


def test_members_see_usage_but_only_owners_see_money(tenant, web_client):
    html = page(web_client(tenant, "admin").get("/settings/plan/"))
    assert "Usage this month" in html and 'id="usage-cost"' not in html and 'id="statements"' not in html


def test_jobs_paused_by_a_downgrade_are_listed(tenant, web_client, make_job):
    make_job(tenant, name="every five minutes", cron_expression="*/5 * * * *")
    change_plan(tenant.organization, Plan.objects.get(code="free"))
    html = page(web_client(tenant, "viewer").get("/settings/plan/"))
    assert 'id="paused-by-plan"' in html and "every five minutes" in html and "min_interval_seconds" in html


def test_statement_page_is_for_owners_of_the_organization(tenant, other_tenant, web_client):
    plan = tenant.organization.plan
    statement = Statement.objects.create(
        organization=tenant.organization, period=date(2030, 1, 1), plan=plan, plan_code=plan.code,
        plan_name=plan.name, runs=12, quota=plan.monthly_executions, base_cents=1900, total_cents=1900,
        lines=[{"description": "Pro plan, January 2030", "quantity": 1, "amount_cents": 1900}])
    owner = web_client(tenant)
    html = page(owner.get(f"/settings/statements/{statement.pk}/"))
    assert "January 2030" in html and "USD 19.00" in html and "Pro plan, January 2030" in html
    assert 'id="statements"' in page(owner.get("/settings/plan/"))
    assert web_client(tenant, "admin").get(f"/settings/statements/{statement.pk}/").status_code == 403
    assert web_client(other_tenant).get(f"/settings/statements/{statement.pk}/").status_code == 404
