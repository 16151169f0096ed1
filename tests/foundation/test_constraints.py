import pytest
from django.db import IntegrityError, transaction

from apps.accounts.models import Membership
from apps.executions.models import Execution
from apps.projects.models import Project
from tests.conftest import utc


def test_database_refuses_a_second_row_for_the_same_occurrence(tenant, make_job):
    job = make_job(tenant)
    at = utc(2027, 1, 1, 3, 0)
    Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=at)
    with pytest.raises(IntegrityError), transaction.atomic():
        # bulk_create bypasses every Python-level check: only the database can refuse it.
        Execution.objects.bulk_create(
            [Execution(job=job, organization=tenant.organization, scheduled_for=at)]
        )
    assert Execution.objects.filter(job=job).count() == 1


def test_same_time_with_another_trigger_is_a_different_occurrence(tenant, make_job):
    job = make_job(tenant)
    at = utc(2027, 1, 1, 3, 0)
    Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=at)
    Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=at,
                             trigger=Execution.Trigger.MANUAL)
    assert Execution.objects.filter(job=job).count() == 2


def test_membership_is_unique_per_user_and_organization(tenant):
    with pytest.raises(IntegrityError), transaction.atomic():
        Membership.objects.create(user=tenant.owner, organization=tenant.organization)


def test_project_slug_is_unique_within_an_organization_only(tenant, other_tenant):
    Project.objects.create(organization=other_tenant.organization, name="Default 2", slug="shared")
    Project.objects.create(organization=tenant.organization, name="Shared", slug="shared")
    with pytest.raises(IntegrityError), transaction.atomic():
        Project.objects.create(organization=tenant.organization, name="Again", slug="shared")


def test_due_index_holds_due_times_only(db):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename, indexdef FROM pg_indexes WHERE indexname = 'jobdue_due'")
        (table, definition) = cursor.fetchone()
    assert table == "jobs_jobdue" and "(next_run_at) WHERE (next_run_at IS NOT NULL)" in definition
