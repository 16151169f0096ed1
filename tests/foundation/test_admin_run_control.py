"""Run control in the Django admin (issue 22): operators cancel runs with the API's cancel,
and reach a job's windows, priority and versions."""

from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import AuditEvent, User
from apps.executions import cancelling
from apps.executions.models import Execution
from apps.jobs import versions
from apps.jobs.models import JobVersion
from tests.foundation.test_admin import operator_client  # noqa: F401 - fixture

CHANGELIST = "admin:executions_execution_changelist"


def run_of(job, status="queued", **fields):
    return Execution.objects.create(job=job, organization=job.organization, status=status,
                                    scheduled_for=fields.pop("scheduled_for", timezone.now()), **fields)


def cancel_action(client, executions):
    return client.post(reverse(CHANGELIST), {"action": "cancel_executions",
                                             "_selected_action": [e.pk for e in executions]}, follow=True)


def test_an_operator_cancels_selected_runs_once_each(operator_client, tenant, make_job,  # noqa: F811
                                                     django_capture_on_commit_callbacks):
    job = make_job(tenant)
    queued = run_of(job, scheduled_for=timezone.now())
    running = run_of(job, status="running", started_at=timezone.now(), scheduled_for=timezone.now())
    finished = run_of(job, status="succeeded", scheduled_for=timezone.now())
    operator = User.objects.get(email="root@example.com")

    listing = operator_client.get(reverse(CHANGELIST)).content.decode()
    assert "Cancel selected executions" in listing
    with django_capture_on_commit_callbacks(execute=True):
        response = cancel_action(operator_client, [queued, running, finished])
    assert response.status_code == 200
    assert "Cancelled 2 execution(s)" in response.content.decode()

    for execution in (queued, running):
        execution.refresh_from_db()
        assert execution.status == "cancelled" and execution.cancelled_at is not None
        assert execution.cancelled_by == {"kind": "operator", "id": str(operator.pk), "name": operator.email}
    assert Execution.objects.get(pk=finished.pk).status == "succeeded"
    # The running run's worker is told through Redis to close its request.
    assert running.pk in cancelling.raised([running.pk])
    events = AuditEvent.objects.filter(action="execution.cancel", actor_user=operator)
    assert sorted(events.values_list("target_id", "data__status_before")) == sorted(
        [(str(queued.pk), "queued"), (str(running.pk), "running")])
    assert all(event.organization_id == tenant.organization.pk and event.data["by_operator"] for event in events)

    # Idempotent: a second cancel changes nothing and logs nothing.
    first_cancel = Execution.objects.get(pk=queued.pk).cancelled_at
    again = cancel_action(operator_client, [queued, running])
    assert "Cancelled 0 execution(s)" in again.content.decode()
    assert Execution.objects.get(pk=queued.pk).cancelled_at == first_cancel
    assert events.count() == 2


def test_staff_who_may_only_view_runs_cannot_cancel(client, tenant, make_job):
    viewer = User.objects.create_user("viewer@example.com", "pw-not-used-elsewhere", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_execution"))
    client.force_login(viewer)
    execution = run_of(make_job(tenant))
    assert "Cancel selected executions" not in client.get(reverse(CHANGELIST)).content.decode()
    cancel_action(client, [execution])
    assert Execution.objects.get(pk=execution.pk).status == "queued"
    assert not AuditEvent.objects.filter(action="execution.cancel").exists()


def test_the_job_admin_shows_windows_priority_and_its_versions(operator_client, tenant, make_job):  # noqa: F811
    job = make_job(tenant)
    versions.record(job, None, [], author=versions.Author(user=None), source=JobVersion.Source.ADMIN)
    page = operator_client.get(reverse("admin:jobs_job_change", args=[job.pk])).content.decode()
    for field in ("windows", "blackouts", "outside_window", "priority"):
        assert f'name="{field}"' in page
    link = reverse("admin:jobs_jobversion_changelist") + f"?job__id__exact={job.pk}"
    assert link.replace("&", "&amp;") in page or link in page
    listing = operator_client.get(link)
    assert listing.status_code == 200
    assert f"/admin/jobs/jobversion/{job.versions.get().pk}/change/" in listing.content.decode()
