"""What the next claim takes, after each path that writes a job's due time or its ``enabled``.

The claim reads two things of a job: whether it is enabled and when it is due. Many paths
write them (pause and resume, the API's edits, the worker's auto-disable, a requested
deletion of the organization); each is checked here through the claim itself, so a path
that stops keeping the scheduler's view right fails here, however that view is stored.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.gdpr import cancel_deletion, request_deletion
from apps.executions.models import Attempt, Execution
from apps.executions.scheduling.tick import claim_due
from apps.executions.worker import recording
from apps.jobs.models import Job
from apps.jobs.services import pause_job, resume_job
from tests.api.conftest import job_body

HOUR = timedelta(hours=1)


def due_job(make_job, tenant, *, ago=timedelta(minutes=1), **fields):
    """A job due ``ago`` before now, every five minutes."""
    job = make_job(tenant, cron_expression="*/5 * * * *", misfire_policy="run_all", **fields)
    job.next_run_at = timezone.now() - ago
    job.save(update_fields=["next_run_at"])
    return job


def runs_of(job):
    return Execution.objects.filter(job=job, trigger="schedule").count()


def failed_attempt(execution):
    now = timezone.now()
    return recording.FinishedAttempt(
        execution=execution, status="failed", next_attempt_at=None, auto_disable_after=3,
        attempt=recording.AttemptValues(
            number=1, started_at=now, finished_at=now, duration_ms=5, request_method="GET",
            request_url="https://example.com/", request_headers={}, request_body="", response_status=500,
            response_headers={}, response_body="", remote_addr="127.0.0.1", outcome="failed",
            error_kind="http_5xx", error_message="HTTP 500"),
    )


def fail_once(tenant, job, path):
    """One failed run of ``job`` recorded by the worker's ``path``, its plan disabling the
    job at its third failure in a row."""
    execution = Execution.objects.create(job=job, organization=tenant.organization, queue="q", status="running",
                                         trigger="manual",
                                         scheduled_for=timezone.now() - HOUR, started_at=timezone.now())
    failed = failed_attempt(execution)
    if path == "group":
        recording.record_attempts([failed])
    elif path == "one_by_one":
        recording.record_attempt(execution, attempt=Attempt(execution_id=execution.id, **vars(failed.attempt)),
                                 status="failed", next_attempt_at=None, auto_disable_after=3)
    else:
        recording.fail_running(execution, error_kind="template_error", error_message="x", now=timezone.now(),
                               auto_disable_after=3)


@pytest.mark.parametrize("path", ["group", "one_by_one", "not_sent"])
def test_a_job_the_worker_auto_disabled_is_not_claimed_though_due(tenant, make_job, path):
    job = due_job(make_job, tenant, consecutive_failures=2)
    fail_once(tenant, job, path)
    job.refresh_from_db()
    assert not job.enabled and job.disabled_reason  # the precondition: the third failure disabled it
    assert claim_due(timezone.now() + HOUR, batch_size=100).claimed == 0
    assert runs_of(job) == 0


def test_a_paused_job_is_not_claimed_and_a_resumed_one_is_claimed_at_its_new_time(tenant, make_job):
    job = due_job(make_job, tenant, ago=HOUR)
    pause_job(job)
    assert claim_due(timezone.now() + HOUR, batch_size=100).claimed == 0
    resume_job(job)
    job.refresh_from_db()
    assert job.next_run_at > timezone.now() - timedelta(seconds=5)  # from now: the missed hour is not caught up
    assert claim_due(job.next_run_at - timedelta(seconds=1), batch_size=100).claimed == 0
    assert claim_due(job.next_run_at, batch_size=100).claimed == 1
    assert runs_of(job) == 1


def test_the_jobs_of_an_organization_being_deleted_are_not_claimed_until_it_is_cancelled(tenant, make_job):
    job = due_job(make_job, tenant)
    request_deletion(tenant.organization, now=timezone.now(), audit=lambda *args: None)
    assert claim_due(timezone.now() + HOUR, batch_size=100).claimed == 0
    cancel_deletion(tenant.organization, now=timezone.now())
    job.refresh_from_db()
    assert job.enabled and job.next_run_at is not None
    assert claim_due(job.next_run_at, batch_size=100).claimed == 1


def test_a_schedule_changed_through_the_api_is_claimed_at_its_new_time_only(api, tenant):
    response = api.post("/api/v1/jobs/", job_body(tenant, schedule={"type": "cron", "expression": "0 0 1 1 *"}))
    assert response.status_code == 201, response.json()
    job = Job.objects.get(pk=response.json()["id"])
    old_due = job.next_run_at
    assert old_due > timezone.now() + timedelta(days=1)
    changed = api.patch(f"/api/v1/jobs/{job.pk}/", {"schedule": {"type": "cron", "expression": "*/5 * * * *"}})
    assert changed.status_code == 200, changed.json()
    job.refresh_from_db()
    new_due = job.next_run_at
    assert new_due < timezone.now() + timedelta(minutes=6)
    assert claim_due(new_due - timedelta(seconds=1), batch_size=100).claimed == 0
    assert claim_due(new_due, batch_size=100).claimed == 1
    job.refresh_from_db()
    assert job.next_run_at == new_due + timedelta(minutes=5)  # advanced along the new schedule
    assert list(Execution.objects.filter(job=job).values_list("scheduled_for", flat=True)) == [new_due]


def test_a_job_paused_through_the_api_is_not_claimed(api, tenant):
    response = api.post("/api/v1/jobs/", job_body(tenant, schedule={"type": "cron", "expression": "* * * * *"}))
    job = Job.objects.get(pk=response.json()["id"])
    assert api.patch(f"/api/v1/jobs/{job.pk}/", {"enabled": False}).status_code == 200
    assert claim_due(timezone.now() + HOUR, batch_size=100).claimed == 0
    assert api.patch(f"/api/v1/jobs/{job.pk}/", {"enabled": True}).status_code == 200
    job.refresh_from_db()
    assert claim_due(job.next_run_at, batch_size=100).claimed == 1


def test_the_api_orders_jobs_by_their_next_run(api, tenant, make_job):
    now = timezone.now()
    late, soon, middle = (make_job(tenant, name=name, next_run_at=now + offset)
                          for name, offset in (("late", 3 * HOUR), ("soon", HOUR), ("middle", 2 * HOUR)))
    ascending = api.get("/api/v1/jobs/?ordering=next_run_at").json()["results"]
    assert [job["name"] for job in ascending] == ["soon", "middle", "late"]
    descending = api.get("/api/v1/jobs/?ordering=-next_run_at").json()["results"]
    assert [job["name"] for job in descending] == ["late", "middle", "soon"]
    assert {job["id"] for job in ascending} == {str(late.pk), str(soon.pk), str(middle.pk)}
