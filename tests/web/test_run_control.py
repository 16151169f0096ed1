"""Run control pages: cancel a run from its page and the history; a job's versions with
their diffs, and rollback."""

from django.utils import timezone

from apps.accounts.models import AuditEvent
from apps.executions.models import Execution
from apps.jobs.models import Job
from tests.web.conftest import job_form


def run_of(job, status="queued"):
    return Execution.objects.create(job=job, organization=job.organization, status=status,
                                    scheduled_for=timezone.now())


def test_the_cancel_button_cancels_a_queued_run(tenant, owner, make_job):
    job = make_job(tenant)
    execution = run_of(job)
    history = owner.get(f"/jobs/{job.pk}/history/").content.decode()
    assert f"/executions/{execution.pk}/cancel/" in history
    detail = owner.get(f"/executions/{execution.pk}/").content.decode()
    assert "Cancel run" in detail
    response = owner.post(f"/executions/{execution.pk}/cancel/", {"next": f"/jobs/{job.pk}/#history"})
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/#history"
    execution.refresh_from_db()
    assert execution.status == "cancelled"
    assert execution.cancelled_by == {"kind": "user", "id": str(owner.user.pk), "name": owner.user.email}
    assert AuditEvent.objects.filter(action="execution.cancel", target_id=str(execution.pk),
                                     actor_user=owner.user).count() == 1
    page = owner.get(f"/executions/{execution.pk}/").content.decode()
    assert "Cancel run" not in page and f"by  {owner.user.email}" in page or owner.user.email in page


def test_a_finished_run_is_not_cancelled_from_the_page(tenant, owner, make_job):
    execution = run_of(make_job(tenant), status="succeeded")
    assert f"/executions/{execution.pk}/cancel/" not in owner.get(f"/executions/{execution.pk}/").content.decode()
    response = owner.post(f"/executions/{execution.pk}/cancel/", follow=True)
    assert "already finished" in response.content.decode()
    assert Execution.objects.get(pk=execution.pk).status == "succeeded"


def test_a_viewer_sees_no_cancel_button_and_cannot_cancel(tenant, web_client, make_job):
    job = make_job(tenant)
    execution = run_of(job)
    viewer = web_client(tenant, "viewer")
    assert "/cancel/" not in viewer.get(f"/jobs/{job.pk}/history/").content.decode()
    assert viewer.post(f"/executions/{execution.pk}/cancel/").status_code == 403
    assert Execution.objects.get(pk=execution.pk).status == "queued"


def test_another_tenants_run_is_404_on_the_page(owner, other_tenant, make_job):
    theirs = run_of(make_job(other_tenant))
    assert owner.post(f"/executions/{theirs.pk}/cancel/").status_code == 404
    assert Execution.objects.get(pk=theirs.pk).status == "queued"


def test_pages_list_versions_with_diffs_and_roll_back(tenant, owner):
    created = owner.post("/jobs/new/", job_form(tenant, name="page one"))
    assert created.status_code == 302, created.content.decode()[:3000]
    job = Job.objects.get(name="page one")
    edited = owner.post(f"/jobs/{job.pk}/edit/", job_form(tenant, name="page two", auth_token="••••"))
    assert edited.status_code == 302, edited.content.decode()[:3000]
    assert list(job.versions.order_by("number").values_list("number", "source")) == [(1, "page"), (2, "page")]
    page = owner.get(f"/jobs/{job.pk}/versions/").content.decode()
    assert "page one" in page and "page two" in page and "Roll back to version 1" in page
    assert "s3cr3t" not in page
    assert f"/jobs/{job.pk}/versions/" in owner.get(f"/jobs/{job.pk}/").content.decode()
    response = owner.post(f"/jobs/{job.pk}/versions/1/rollback/")
    assert response.status_code == 302
    job.refresh_from_db()
    assert (job.name, job.version) == ("page one", 3)
    assert job.versions.get(number=3).actor_user_id == owner.user.pk
    assert AuditEvent.objects.filter(action="job.rollback", target_id=str(job.pk)).count() == 1


def test_a_viewer_sees_versions_but_cannot_roll_back(tenant, owner, web_client):
    owner.post("/jobs/new/", job_form(tenant, name="one"))
    job = Job.objects.get(name="one")
    owner.post(f"/jobs/{job.pk}/edit/", job_form(tenant, name="two", auth_token="••••"))
    viewer = web_client(tenant, "viewer")
    page = viewer.get(f"/jobs/{job.pk}/versions/")
    assert page.status_code == 200 and "Roll back" not in page.content.decode()
    assert viewer.post(f"/jobs/{job.pk}/versions/1/rollback/").status_code == 403
