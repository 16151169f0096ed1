"""Operators: plans edited in the admin apply to their organizations; statements listed."""

from datetime import date

import pytest
from django.urls import reverse

from apps.accounts.models import User
from apps.billing.models import Statement
from apps.jobs.models import Job
from apps.plans.models import Plan


@pytest.fixture
def operator(client, db):
    client.force_login(User.objects.create_superuser("ops@example.com", "pw-not-used-elsewhere"))
    return client


def test_lowering_a_plan_and_applying_it_pauses_the_jobs_it_no_longer_allows(operator, tenant, make_job):
    job = make_job(tenant, cron_expression="0 * * * *", timeout_seconds=50)
    pro = Plan.objects.get(code="pro")
    pro.max_timeout_seconds = 40
    pro.save()
    response = operator.post(reverse("admin:plans_plan_changelist"),
                             {"action": "apply_limits", "_selected_action": [pro.pk]}, follow=True)
    assert "1 jobs paused, 0 resumed" in response.content.decode()
    job.refresh_from_db()
    assert not job.enabled and "max_timeout_seconds" in job.paused_reason
    assert Job.objects.filter(pk=job.pk).exists()


def test_statements_are_listed_for_operators(operator, tenant):
    plan = tenant.organization.plan
    Statement.objects.create(organization=tenant.organization, period=date(2030, 1, 1), plan=plan, plan_code="pro",
                             plan_name="Pro", runs=5, quota=10, base_cents=1900, total_cents=1900)
    page = operator.get(reverse("admin:billing_statement_changelist")).content.decode()
    assert tenant.organization.name in page and "1900" in page
