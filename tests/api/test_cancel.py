"""POST /api/v1/executions/{id}/cancel/ and the cancel's effects on PostgreSQL (the worker
side with real processes is in tests/delivery/test_cancel_worker.py)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.models import AuditEvent
from apps.executions import cancelling
from apps.executions.scheduling import sweeper
from apps.executions.worker.batch import claim
from apps.executions.models import Execution
from apps.accounts.apikeys import create_api_key
from tests.api.conftest import error_of, key_client
from tests.conftest import utc


def run_of(job, status="queued", **fields):
    return Execution.objects.create(job=job, organization=job.organization, status=status,
                                    scheduled_for=fields.pop("scheduled_for", timezone.now()), **fields)


def cancel(client, execution):
    return client.post(f"/api/v1/executions/{execution.pk}/cancel/")


def test_a_queued_run_cancelled_is_never_claimed(api, tenant, make_job):
    execution = run_of(make_job(tenant))
    response = cancel(api, execution)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "cancelled" and body["cancelled_at"]
    assert body["cancelled_by"] == {"kind": "api_key", "id": str(tenant.api_key.pk), "name": tenant.api_key.name}
    assert claim([execution.pk], timezone.now()) == []
    assert Execution.objects.get(pk=execution.pk).status == "cancelled"


def test_a_waiting_retry_cancelled_is_never_published_again(api, tenant, make_job):
    now = timezone.now()
    execution = run_of(make_job(tenant), attempt=1, next_attempt_at=now - timedelta(seconds=1), published_at=None)
    assert cancel(api, execution).status_code == 200
    assert sweeper.due_retries(now) == []
    assert sweeper.stale(now + timedelta(days=1), republish_after=1) == []
    assert Execution.objects.get(pk=execution.pk).next_attempt_at is None


def test_a_running_run_cancelled_is_not_overwritten_by_its_worker(api, tenant, make_job):
    """The worker's recording guards on ``running``: a late result leaves the run cancelled."""
    from apps.executions.worker import recording

    execution = run_of(make_job(tenant), status="running", started_at=timezone.now())
    assert cancel(api, execution).status_code == 200
    now = timezone.now()
    attempt = recording.AttemptValues(
        number=1, started_at=now, finished_at=now, duration_ms=5, request_method="GET", request_url="https://x/",
        request_headers={}, request_body="", response_status=None, response_headers={}, response_body="",
        remote_addr="", outcome="cancelled", error_kind="cancelled", error_message="closed")
    recording.record_attempts([recording.FinishedAttempt(execution=execution, attempt=attempt, status="cancelled",
                                                next_attempt_at=None, auto_disable_after=5)])
    execution.refresh_from_db()
    assert execution.status == "cancelled" and execution.next_attempt_at is None
    assert list(execution.attempts.values_list("outcome", flat=True)) == ["cancelled"]
    assert execution.job.consecutive_failures == 0


def test_cancel_is_idempotent_and_audited_once(api, tenant, make_job):
    execution = run_of(make_job(tenant))
    first, second = cancel(api, execution), cancel(api, execution)
    assert second.status_code == 200 and second.json() == first.json()
    events = AuditEvent.objects.filter(organization=tenant.organization, action="execution.cancel")
    assert [(e.target_id, e.actor_api_key_id, e.data) for e in events] == [
        (str(execution.pk), tenant.api_key.pk, {"status_before": "queued"})]


@pytest.mark.parametrize("status", ["succeeded", "failed", "dead", "skipped"])
def test_a_finished_run_answers_409(api, tenant, make_job, status):
    execution = run_of(make_job(tenant), status=status, finished_at=timezone.now())
    response = cancel(api, execution)
    assert response.status_code == 409
    assert error_of(response)["code"] == "execution_finished"
    assert response.json()["error"]["status"] == status
    assert Execution.objects.get(pk=execution.pk).status == status
    assert not AuditEvent.objects.filter(action="execution.cancel").exists()


@pytest.mark.off_contract  # a failing audit write provokes a 500
def test_the_cancel_and_its_audit_event_commit_together(api, tenant, make_job, monkeypatch):
    from apps.api import base

    execution = run_of(make_job(tenant))

    def failing_audit(*args, **kwargs):
        raise RuntimeError("audit store down")

    monkeypatch.setattr(base, "audit", failing_audit)
    api.raise_request_exception = False
    assert cancel(api, execution).status_code == 500
    assert Execution.objects.get(pk=execution.pk).status == "queued"


def test_another_tenants_run_is_404(api, other_tenant, make_job):
    theirs = run_of(make_job(other_tenant))
    response = cancel(api, theirs)
    assert response.status_code == 404 and error_of(response)["code"] == "not_found"
    assert Execution.objects.get(pk=theirs.pk).status == "queued"


def test_a_run_deleted_with_its_job_while_being_cancelled_is_404_not_500(api, tenant, make_job, monkeypatch):
    """The job is deleted between the request's read of the run and its cancel (the race
    CI's interleavings test once hit): the caller gets the 404 it would have got a moment later."""
    from apps.executions.history.api import ExecutionViewSet

    execution = run_of(make_job(tenant))
    read = ExecutionViewSet.get_object

    def read_then_lose_the_job(self):
        found = read(self)
        found.job.delete()
        return found

    monkeypatch.setattr(ExecutionViewSet, "get_object", read_then_lose_the_job)
    response = cancel(api, execution)
    assert response.status_code == 404 and error_of(response)["code"] == "not_found"
    assert not AuditEvent.objects.filter(action="execution.cancel").exists()


def test_the_service_says_a_run_deleted_since_it_was_read_is_gone(tenant, make_job):
    execution = run_of(make_job(tenant))
    execution.job.delete()
    with pytest.raises(cancelling.ExecutionGone):
        cancelling.cancel(execution, by=cancelling.cancelled_by())


@pytest.mark.parametrize("role, allowed", [("viewer", False), ("developer", True)])
def test_a_viewer_cannot_cancel(tenant, make_job, member_client, role, allowed):
    execution = run_of(make_job(tenant))
    client = member_client(tenant, role)
    response = cancel(client, execution)
    assert response.status_code == (200 if allowed else 403), response.content
    assert Execution.objects.get(pk=execution.pk).status == ("cancelled" if allowed else "queued")
    if allowed:
        assert response.json()["cancelled_by"] == {"kind": "user", "id": str(client.user.pk),
                                                   "name": client.user.email}


def test_a_read_key_cannot_cancel(tenant, make_job):
    execution = run_of(make_job(tenant))
    client = key_client(create_api_key(tenant.organization, "ro", scopes=["read"])[1])
    assert cancel(client, execution).status_code == 403


def test_a_cancelled_run_is_final_and_not_a_failure(api, tenant, make_job):
    """Replayable like any finished run, listed by ?status=cancelled, never in the dead letter."""
    job = make_job(tenant)
    execution = run_of(job, scheduled_for=utc(2027, 1, 1))
    cancel(api, execution)
    listed = api.get(f"/api/v1/executions/?status=cancelled&job={job.pk}").json()["results"]
    assert [e["id"] for e in listed] == [str(execution.pk)]
    assert api.get("/api/v1/dead-letter/").json()["results"] == []
    assert api.post(f"/api/v1/executions/{execution.pk}/replay/").status_code == 202
    job.refresh_from_db()
    assert (job.consecutive_failures, job.last_status) == (0, "")


def test_the_cancel_raises_a_flag_for_a_running_run_only(tenant, make_job, django_capture_on_commit_callbacks):
    """The flag the workers' watch reads (Redis): only a run a worker may hold needs one."""
    job = make_job(tenant)
    queued, running = run_of(job), run_of(job, status="running", started_at=timezone.now(),
                                          scheduled_for=timezone.now() + timedelta(seconds=1))
    with django_capture_on_commit_callbacks(execute=True):
        cancelling.cancel(queued, by=cancelling.cancelled_by())
        cancelling.cancel(running, by=cancelling.cancelled_by())
    assert cancelling.raised([queued.pk, running.pk]) == {running.pk}


def test_the_schema_documents_the_cancel(api):
    schema = api.get("/api/v1/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/executions/{id}/cancel/"]["post"]
    assert {"200", "403", "404", "409"} <= set(operation["responses"])
    assert "execution_finished" in operation["description"]
