"""Every admin changelist, add page and change page renders for a superuser."""

import pytest
from django.contrib import admin
from django.urls import reverse

from apps.accounts.models import User
from apps.executions.models import Attempt, Execution
from apps.jobs.models import Job
from tests.conftest import utc


@pytest.fixture
def operator_client(client, db):
    operator = User.objects.create_superuser("root@example.com", "pw-not-used-elsewhere")
    client.force_login(operator)
    return client


@pytest.fixture
def populated(tenant, make_job):
    job = make_job(tenant)
    execution = Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=utc(2027, 1, 1))
    Attempt.objects.create(execution=execution, number=1, started_at=utc(2027, 1, 1), request_method="GET",
                           request_url=job.url, outcome="succeeded")
    return tenant


def _admin_models():
    return [model for model in admin.site._registry]


@pytest.mark.parametrize("model", _admin_models(), ids=lambda m: m._meta.label)
def test_changelist_and_change_page_render(operator_client, populated, model):
    opts = model._meta
    changelist = operator_client.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist"))
    assert changelist.status_code == 200
    obj = model._default_manager.first()
    if obj is not None:
        change = operator_client.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[obj.pk]))
        assert change.status_code == 200
    if admin.site._registry[model].has_add_permission(changelist.wsgi_request):
        add = operator_client.get(reverse(f"admin:{opts.app_label}_{opts.model_name}_add"))
        assert add.status_code == 200


def test_operators_can_suspend_and_change_plan(operator_client, populated):
    org = populated.organization
    url = reverse("admin:accounts_organization_changelist")
    operator_client.post(url, {"action": "suspend", "_selected_action": [org.pk]})
    org.refresh_from_db()
    assert org.suspended
    populated.api_key.refresh_from_db()
    assert not populated.api_key.is_usable()

    from apps.plans.models import Plan

    enterprise = Plan.objects.get(code="enterprise")
    operator_client.post(url, {"action": "change_plan", "_selected_action": [org.pk], "plan": enterprise.pk})
    operator_client.post(url, {"action": "unsuspend", "_selected_action": [org.pk]})
    org.refresh_from_db()
    assert org.plan == enterprise and not org.suspended
    assert list(org.audit_events.order_by("created_at").values_list("action", flat=True)) == [
        "organization.suspend", "organization.change_plan", "organization.unsuspend",
    ]


def test_operators_can_pause_resume_jobs_and_revoke_keys(operator_client, populated):
    job = Job.objects.get(organization=populated.organization)
    url = reverse("admin:jobs_job_changelist")
    operator_client.post(url, {"action": "pause", "_selected_action": [job.pk]})
    job.refresh_from_db()
    assert not job.enabled
    operator_client.post(url, {"action": "resume", "_selected_action": [job.pk]})
    job.refresh_from_db()
    assert job.enabled and job.next_run_at is not None

    key = populated.api_key
    operator_client.post(reverse("admin:accounts_apikey_changelist"), {"action": "revoke", "_selected_action": [key.pk]})
    key.refresh_from_db()
    assert key.revoked_at is not None and not key.is_usable()


def test_executions_changelist_never_counts_the_whole_table(operator_client, populated):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        response = operator_client.get(reverse("admin:executions_execution_changelist"))
    assert response.status_code == 200
    counts = [q["sql"] for q in queries if "COUNT(" in q["sql"].upper()]
    # The only count is the capped one (a LIMIT inside a subquery), never a bare COUNT(*).
    assert counts and all("LIMIT" in sql.upper() for sql in counts)
    # and executions are read read-only
    assert not admin.site._registry[Execution].has_change_permission(response.wsgi_request)


def test_organization_search_finds_by_owner_email(operator_client, populated, other_tenant):
    response = operator_client.get(reverse("admin:accounts_organization_changelist"), {"q": populated.owner.email})
    assert populated.organization.name.encode() in response.content
    assert other_tenant.organization.name.encode() not in response.content
