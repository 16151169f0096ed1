"""Each organization's job count is kept by database triggers (apps.jobs.jobcount), on
PostgreSQL here and on the embedded SQLite in a process of its own."""

import pytest
from django.db import connection

from apps.accounts.models import Organization
from apps.jobs.jobcount import ensure_triggers, trigger_names
from apps.jobs.models import Job, OrganizationJobCount
from apps.jobs.queries import job_count
from tests.support.embedded import embedded_shell


def _counted(*tenants):
    return [job_count(tenant.organization.pk) for tenant in tenants]


def _job(tenant, name):
    return Job(project=tenant.project, organization=tenant.organization, name=name,
               cron_expression="*/5 * * * *", url="https://example.com/hook")


def test_creates_and_deletes_of_every_kind_are_counted(make_tenant, make_job):
    first, second = make_tenant(), make_tenant()
    assert _counted(first, second) == [0, 0]
    jobs = [make_job(first) for _ in range(3)]
    Job.objects.bulk_create([_job(second, f"bulk {n}") for n in range(4)])
    assert _counted(first, second) == [3, 4]

    jobs[0].delete()
    Job.objects.filter(organization=second.organization, name__in=["bulk 0", "bulk 1"]).delete()
    assert _counted(first, second) == [2, 2]

    second.project.delete()  # the cascade deletes its jobs
    assert _counted(first, second) == [2, 0]


def test_a_job_moved_to_another_organization_is_counted_there(make_tenant, make_job):
    first, second = make_tenant(), make_tenant()
    job = make_job(first)
    make_job(second)
    Job.objects.filter(pk=job.pk).update(organization=second.organization, project=second.project)
    assert _counted(first, second) == [0, 2]
    job.refresh_from_db()
    job.save()  # saving every column, the organization unchanged, counts nothing
    assert _counted(first, second) == [0, 2]


@pytest.mark.django_db(transaction=True)
def test_a_truncated_jobs_table_counts_nothing(make_tenant, make_job):
    tenant = make_tenant()
    make_job(tenant)
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE jobs_job CASCADE")
    assert _counted(tenant) == [0]
    make_job(tenant)
    assert _counted(tenant) == [1]


def test_an_organization_deleted_takes_its_count_with_it(make_tenant, make_job):
    tenant = make_tenant()
    make_job(tenant)
    Organization.objects.filter(pk=tenant.organization.pk).delete()
    assert not OrganizationJobCount.objects.filter(organization_id=tenant.organization.pk).exists()


def test_a_missing_trigger_is_installed_again_and_every_count_taken_afresh(make_tenant, make_job):
    tenant = make_tenant()
    make_job(tenant)
    make_job(tenant)
    assert ensure_triggers() == []  # all in place: nothing done
    with connection.cursor() as cursor:
        cursor.execute("DROP TRIGGER jobs_job_count_insert ON jobs_job")
    make_job(tenant)  # not counted while the trigger is gone
    assert _counted(tenant) == [2]

    assert ensure_triggers() == ["jobs_job_count_insert"]
    assert _counted(tenant) == [3]
    make_job(tenant)
    assert _counted(tenant) == [4]


SQLITE_SCRIPT = """
from django.core.management import call_command
from django.db import connection
from apps.jobs.queries import job_count
from apps.jobs.models import Job
from apps.projects.provisioning import provision_tenant

def job(tenant, name):
    return Job(project=tenant.project, organization=tenant.organization, name=name,
               cron_expression="*/5 * * * *", url="https://example.com/hook")

first = provision_tenant(org_name="First", email="first@example.com", plan_code="free")
second = provision_tenant(org_name="Second", email="second@example.com", plan_code="free")
job(first, "a").save()
Job.objects.bulk_create([job(first, "b"), job(second, "c")])
print(job_count(first.organization.pk), job_count(second.organization.pk))
Job.objects.filter(name="a").delete()
Job.objects.filter(name="b").update(organization=second.organization, project=second.project)
print(job_count(first.organization.pk), job_count(second.organization.pk))
# Altering the jobs table makes SQLite rebuild it, which drops its triggers: migrate puts them back.
with connection.cursor() as cursor:
    cursor.execute("DROP TRIGGER jobs_job_count_insert")
    cursor.execute("DROP TRIGGER jobs_job_count_delete")
job(first, "d").save()
call_command("migrate", verbosity=0)
print(job_count(first.organization.pk), job_count(second.organization.pk))
job(first, "e").save()
print(job_count(first.organization.pk), job_count(second.organization.pk))
"""


@pytest.mark.slow
def test_the_embedded_sqlite_keeps_the_counts_too(tmp_path):
    assert embedded_shell(tmp_path, SQLITE_SCRIPT).split() == ["2", "1", "0", "2", "1", "2", "2", "2"]


@pytest.mark.django_db
def test_the_jobs_table_has_the_count_triggers_and_no_other():
    with connection.cursor() as cursor:
        cursor.execute("SELECT tgname FROM pg_trigger WHERE tgrelid = 'jobs_job'::regclass AND NOT tgisinternal")
        assert sorted(name for (name,) in cursor.fetchall()) == trigger_names()
