"""Deleting a project with jobs (``?force=true``, the page's checkbox) deletes the jobs the
way a job delete does: the jobs at once, their executions after, in batches, by the purge
task on the default queue, not inside the request. Real PostgreSQL."""

from datetime import timedelta

import pytest

from apps.accounts.models import AuditEvent
from apps.executions import purging
from apps.executions.models import Attempt, DeletedJob, Execution
from apps.jobs.models import Job
from apps.projects.models import Project
from tests.api.test_job_delete_history import DAY, _history


@pytest.fixture
def crowded(tenant, make_job):
    """The tenant's project with two jobs and their history (5 and 4 finished runs, one queued)."""
    first, second = make_job(tenant, name="first"), make_job(tenant, name="second")
    _history(tenant, first, 5)
    _history(tenant, second, 4)
    queued = Execution.objects.create(job=first, organization=tenant.organization, scheduled_for=DAY + timedelta(hours=1))
    return tenant.project, [first, second], queued


@pytest.fixture
def owner_browser(tenant):
    from django.test import Client

    client = Client()
    client.force_login(tenant.owner)
    return client


DELETES = {
    "api": lambda api, browser, project: api.delete(f"/api/v1/projects/{project.pk}/?force=true").status_code == 204,
    "page": lambda api, browser, project: browser.post(f"/settings/projects/{project.pk}/delete/",
                                                       {"force": "true"}).status_code == 302,
}


@pytest.mark.parametrize("way", sorted(DELETES))
def test_a_project_delete_leaves_the_history_to_the_batched_purge(way, api, owner_browser, crowded,
                                                                 django_capture_on_commit_callbacks):
    project, jobs, queued = crowded
    ids = [job.pk for job in jobs]
    with django_capture_on_commit_callbacks() as published:
        assert DELETES[way](api, owner_browser, project)
    assert not Project.objects.filter(pk=project.pk).exists() and not Job.objects.filter(pk__in=ids).exists()
    assert AuditEvent.objects.get(action="project.delete").data["jobs"] == 2
    # in the request: the unfinished run only; the finished history waits, hidden
    assert not Execution.objects.filter(pk=queued.pk).exists()
    assert Execution.objects.filter(job_id__in=ids).count() == 9
    assert set(DeletedJob.objects.values_list("job_id", flat=True)) == set(ids)
    assert len(published) == 2  # one purge task a job
    for job_id in ids:
        purging.purge_deleted_job(job_id, batch_size=2)
    assert not Execution.objects.filter(job_id__in=ids).exists()
    assert not Attempt.objects.filter(execution__job_id__in=ids).exists()
