"""A job's due time in its narrow row (apps.jobs.models.JobDue): one copy, kept right by
every writer, and gone from a disabled job whatever disabled it.

tests/scheduler/test_claimable.py checks the same writers through the claim; these check the
stored row itself, which the claim's second guard (``enabled``) would hide."""

import threading
from datetime import timedelta
from types import SimpleNamespace

import psycopg
import pytest
from django.contrib.admin.sites import site
from django.db import connection
from django.utils import timezone

from apps.accounts.models import User
from apps.executions.scheduling.tick import claim_due
from apps.jobs.models import Job, JobDue
from apps.jobs.services import pause_job
from tests.api.conftest import job_body

HOUR = timedelta(hours=1)


def stored_due(job):
    """The job's due time as its row holds it (None: no row, or a null time)."""
    return JobDue.objects.filter(job_id=job.pk).values_list("next_run_at", flat=True).first()


def test_the_jobs_table_keeps_no_due_time_of_its_own(db):
    columns = {column.name for column in connection.introspection.get_table_description(
        connection.cursor(), Job._meta.db_table)}
    assert "next_run_at" not in columns
    assert "next_run_at" not in {field.name for field in Job._meta.concrete_fields}


def test_a_job_created_through_the_api_has_its_due_time_stored(api, tenant):
    response = api.post("/api/v1/jobs/", job_body(tenant, schedule={"type": "cron", "expression": "0 3 * * *"}))
    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    assert stored_due(job) is not None
    assert response.json()["next_run_at"] == stored_due(job).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_disabling_a_job_by_any_statement_clears_its_due_time(tenant, make_job):
    job = make_job(tenant, next_run_at=timezone.now() - HOUR)
    assert stored_due(job) is not None
    Job.objects.filter(pk=job.pk).update(enabled=False)  # no service: the trigger is the rule
    assert stored_due(job) is None
    assert claim_due(timezone.now() + HOUR, batch_size=10).claimed == 0


def test_an_update_that_leaves_a_job_enabled_keeps_its_due_time(tenant, make_job):
    due = timezone.now() + HOUR
    job = make_job(tenant, next_run_at=due)
    Job.objects.filter(pk=job.pk).update(enabled=True, name="renamed")
    assert stored_due(job) == due


def test_a_disabled_job_stores_no_due_time_whatever_it_is_given(tenant, make_job):
    job = make_job(tenant, enabled=False, next_run_at=timezone.now() - HOUR)
    assert stored_due(job) is None and job.next_run_at is None
    job.next_run_at = timezone.now()
    job.save(update_fields=["next_run_at"])
    job.refresh_from_db()
    assert job.next_run_at is None


def test_a_due_time_is_written_by_save_only_when_named(tenant, make_job):
    due = timezone.now() + HOUR
    job = make_job(tenant, next_run_at=due)
    job.next_run_at = due + HOUR
    job.save(update_fields=["name"])
    assert stored_due(job) == due
    job.save(update_fields=["next_run_at"])
    assert stored_due(job) == due + HOUR
    job.refresh_from_db()
    assert job.next_run_at == due + HOUR


def test_bulk_created_jobs_keep_their_due_times(tenant):
    due = timezone.now() + HOUR
    jobs = Job.objects.bulk_create([
        Job(project=tenant.project, organization=tenant.organization, name=f"bulk {n}", cron_expression="* * * * *",
            url="https://example.com/", enabled=n != 2, next_run_at=due + timedelta(minutes=n)) for n in range(3)])
    assert [stored_due(job) for job in jobs] == [due, due + timedelta(minutes=1), None]
    assert [job.next_run_at for job in jobs] == [due, due + timedelta(minutes=1), None]


def test_a_deleted_job_takes_its_due_time_along(api, tenant):
    response = api.post("/api/v1/jobs/", job_body(tenant, schedule={"type": "cron", "expression": "* * * * *"}))
    job_id = response.json()["id"]
    assert JobDue.objects.filter(job_id=job_id).exists()
    assert api.delete(f"/api/v1/jobs/{job_id}/").status_code == 204
    assert not JobDue.objects.filter(job_id=job_id).exists()


def test_the_api_shows_no_next_run_for_a_paused_job_and_one_after_resuming(api, tenant):
    response = api.post("/api/v1/jobs/", job_body(tenant, schedule={"type": "cron", "expression": "* * * * *"}))
    url = f"/api/v1/jobs/{response.json()['id']}/"
    assert response.json()["next_run_at"] is not None
    assert api.patch(url, {"enabled": False}).json()["next_run_at"] is None
    assert api.get(url).json()["next_run_at"] is None
    assert [job["next_run_at"] for job in api.get("/api/v1/jobs/").json()["results"]] == [None]
    assert [job["next_run_at"] for job in api.get("/api/v1/jobs/?enabled=false").json()["results"]] == [None]
    resumed = api.patch(url, {"enabled": True}).json()
    assert resumed["next_run_at"] is not None
    assert api.get("/api/v1/jobs/").json()["results"][0]["next_run_at"] == resumed["next_run_at"]


@pytest.mark.parametrize("edit", ["re-enable", "create", "schedule"])
def test_an_operator_who_enables_adds_or_reschedules_a_job_in_the_admin_gives_it_a_due_time(rf, tenant, make_job,
                                                                                            edit):
    request = rf.post("/admin/")
    request.user = User.objects.create_superuser(email="ops@example.com", password="x" * 20)
    if edit == "create":
        job = Job(project=tenant.project, organization=tenant.organization, name="by operator",
                  cron_expression="*/5 * * * *", url="https://example.com/")
        site._registry[Job].save_model(request, job, form=SimpleNamespace(changed_data=["name"]), change=False)
    elif edit == "schedule":
        job = make_job(tenant, next_run_at=timezone.now() - HOUR, cron_expression="0 0 1 1 *")
        job.cron_expression = "*/5 * * * *"
        site._registry[Job].save_model(request, job, form=SimpleNamespace(changed_data=["cron_expression"]),
                                       change=True)
    else:
        job = make_job(tenant, next_run_at=timezone.now() - HOUR)
        pause_job(job)
        job.refresh_from_db()
        job.enabled = True
        site._registry[Job].save_model(request, job, form=SimpleNamespace(changed_data=["enabled"]), change=True)
    due = stored_due(job)
    assert due is not None and timezone.now() < due <= timezone.now() + timedelta(minutes=5)


# --- the claim's locks: the narrow rows only ---------------------------------------------------

def other_session():
    """A second session on the test database, as another scheduler's."""
    settings = connection.settings_dict
    return psycopg.connect(host=settings["HOST"] or "127.0.0.1", port=settings["PORT"] or 5432,
                           user=settings["USER"], dbname=settings["NAME"])


@pytest.mark.django_db(transaction=True)
def test_a_claim_skips_a_due_row_another_holds_and_a_pause_waits_for_that_claim(tenant, make_job):
    now = timezone.now()
    held, _free = (make_job(tenant, name=name, next_run_at=now - HOUR) for name in ("held", "free"))
    with other_session() as other:
        other.execute("SELECT 1 FROM jobs_jobdue WHERE job_id = %s FOR UPDATE", [held.pk])
        assert claim_due(now, batch_size=10).claimed == 1  # the free one; the held one is skipped
        with connection.cursor() as cursor:  # the job's own row is not locked by a claim
            cursor.execute("SET lock_timeout = '2s'")
            Job.objects.filter(pk=held.pk).update(name="renamed while claimed")
            cursor.execute("RESET lock_timeout")
        pausing = threading.Thread(target=lambda: (pause_job(Job.objects.get(pk=held.pk)), connection.close()))
        pausing.start()
        pausing.join(timeout=1)
        assert pausing.is_alive()  # the pause's trigger waits for the claim holding the due row
        other.execute("UPDATE jobs_jobdue SET next_run_at = %s WHERE job_id = %s", [now + HOUR, held.pk])
        other.commit()  # the other claim advanced it and committed
    pausing.join(timeout=10)
    assert not pausing.is_alive()
    assert stored_due(held) is None  # the pause, after the claim, cleared the advanced time
    assert claim_due(now + 2 * HOUR, batch_size=10).claimed == 1  # the free job's next run only
