from apps.accounts.models import ApiKey, AuditEvent
from apps.executions.models import Execution
from apps.jobs.models import Job
from apps.projects.models import Project
from tests.conftest import utc


def test_querysets_scope_every_model_to_one_organization(tenant, other_tenant, make_job):
    mine = make_job(tenant)
    theirs = make_job(other_tenant)
    Execution.objects.create(job=mine, organization=tenant.organization, scheduled_for=utc(2027, 1, 1))
    Execution.objects.create(job=theirs, organization=other_tenant.organization, scheduled_for=utc(2027, 1, 1))
    AuditEvent.objects.create(organization=other_tenant.organization, action="x")

    org = tenant.organization
    assert list(Job.objects.for_organization(org)) == [mine]
    assert list(Project.objects.for_organization(org)) == [tenant.project]
    assert list(ApiKey.objects.for_organization(org)) == [tenant.api_key]
    assert [e.job_id for e in Execution.objects.for_organization(org)] == [mine.id]
    assert not AuditEvent.objects.for_organization(org).exists()
