"""Deleting a job with a long history: the job goes at once, in the request; its executions
(and their attempts) are deleted afterwards in short batches, and meanwhile its history is
hidden from its organization everywhere (API, pages, export, roll-ups). Real PostgreSQL."""

import gzip
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts.gdpr import compressed_export
from apps.executions import purging
from apps.executions.models import Attempt, DeletedJob, Execution, JobDayStats
from apps.executions.tasks import purge_deleted_job
from apps.executions.usage.rollups import roll_up
from apps.jobs.models import Job
from tests.conftest import utc
from tests.support.processes import start_worker, wait_for

DAY = utc(2027, 1, 4)


def _history(tenant, job, runs):
    executions = [Execution.objects.create(job=job, organization=tenant.organization, status="succeeded",
                                           scheduled_for=DAY + timedelta(minutes=i), attempt=1, duration_ms=5)
                  for i in range(runs)]
    Attempt.objects.bulk_create([Attempt(execution=e, number=1, started_at=e.scheduled_for, request_method="GET",
                                         request_url="https://example.com/", outcome="succeeded")
                                 for e in executions])
    return executions


@pytest.fixture
def doomed(tenant, make_job):
    """A job with 7 finished runs and one still queued, beside a job that stays."""
    job, kept = make_job(tenant, name="doomed"), make_job(tenant, name="kept")
    history = _history(tenant, job, 7)
    queued = Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=DAY + timedelta(hours=1))
    kept_run = _history(tenant, kept, 1)[0]
    return job, history, queued, kept_run


def _visible_ids(api):
    return {e["id"] for e in api.get("/api/v1/executions/?limit=100").json()["results"]}


def _deleted(api, job, django_capture_on_commit_callbacks):
    """The API's delete; the purge task it publishes after commit is captured, not sent."""
    with django_capture_on_commit_callbacks() as published:
        assert api.delete(f"/api/v1/jobs/{job.pk}/").status_code == 204
    return published


def test_the_request_removes_the_job_and_its_unfinished_runs_only(api, doomed, django_capture_on_commit_callbacks):
    job, history, queued, kept_run = doomed
    _deleted(api, job, django_capture_on_commit_callbacks)
    assert not Job.objects.filter(pk=job.pk).exists()
    assert not Execution.objects.filter(pk=queued.pk).exists()  # never sent for a job that is gone
    # the finished history waits for the purge, hidden
    assert Execution.objects.filter(job_id=job.pk).count() == 7
    assert Attempt.objects.filter(execution__job_id=job.pk).count() == 7
    assert DeletedJob.objects.filter(job_id=job.pk).exists()


def test_the_history_of_a_deleted_job_is_hidden_meanwhile(api, tenant, owner_browser, doomed,
                                                          django_capture_on_commit_callbacks):
    job, history, queued, kept_run = doomed
    _deleted(api, job, django_capture_on_commit_callbacks)
    assert _visible_ids(api) == {str(kept_run.pk)}
    assert api.get(f"/api/v1/executions/{history[0].pk}/").status_code == 404
    assert api.post(f"/api/v1/executions/{history[0].pk}/replay/").status_code == 404
    assert owner_browser.get(f"/executions/{history[0].pk}/").status_code == 404
    exported = gzip.decompress(compressed_export(tenant.organization)).decode()
    assert str(kept_run.pk) in exported and not any(str(e.pk) in exported for e in history)
    roll_up(DAY.date(), organization=tenant.organization)  # no roll-up of a job that is gone (its key would fail)
    assert set(JobDayStats.objects.values_list("job_id", flat=True)) == {kept_run.job_id}


def test_the_purge_deletes_the_history_in_batches(api, tenant, doomed, django_capture_on_commit_callbacks):
    job, history, queued, kept_run = doomed
    published = _deleted(api, job, django_capture_on_commit_callbacks)
    assert len(published) == 1  # the purge task, on the default queue
    assert purge_deleted_job.name == purging.PURGE_DELETED_JOB_TASK  # the name the purge is sent by
    report = purging.purge_deleted_job(job.pk, batch_size=3)
    assert (report.executions, report.batches) == (7, 3)
    assert not Execution.objects.filter(job_id=job.pk).exists()
    assert not Attempt.objects.filter(execution__job_id=job.pk).exists()
    assert Execution.objects.filter(pk=kept_run.pk).exists() and kept_run.attempts.count() == 1


def test_the_housekeeping_purge_finishes_what_a_lost_task_left_and_forgets_the_job(
        api, tenant, doomed, django_capture_on_commit_callbacks):
    job, history, queued, kept_run = doomed
    _deleted(api, job, django_capture_on_commit_callbacks)  # its task never runs
    purging.purge_deleted_jobs(now=timezone.now(), batch_size=5)
    assert not Execution.objects.filter(job_id=job.pk).exists()
    assert DeletedJob.objects.filter(job_id=job.pk).exists()  # kept a while: a run a racing trigger adds is purged too
    late = Execution.objects.create(job_id=job.pk, organization=tenant.organization, scheduled_for=DAY)
    purging.purge_deleted_jobs(now=timezone.now() + purging.KEEP_TOMBSTONE + timedelta(minutes=1), batch_size=5)
    assert not Execution.objects.filter(pk=late.pk).exists()
    assert not DeletedJob.objects.filter(job_id=job.pk).exists()


def test_the_page_delete_works_the_same_way(tenant, owner_browser, doomed, django_capture_on_commit_callbacks):
    job, history, queued, kept_run = doomed
    with django_capture_on_commit_callbacks() as published:
        assert owner_browser.post(f"/jobs/{job.pk}/delete/").status_code == 302
    assert not Job.objects.filter(pk=job.pk).exists() and len(published) == 1
    assert Execution.objects.filter(job_id=job.pk).count() == 7
    assert owner_browser.get(f"/executions/{history[0].pk}/").status_code == 404


@pytest.fixture
def owner_browser(tenant):
    from django.test import Client

    client = Client()
    client.force_login(tenant.owner)
    return client


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_worker_of_the_default_queue_purges_the_history(tmp_path, api, doomed):
    job, history, queued, kept_run = doomed
    worker = start_worker(tmp_path, ["default"], name="default", concurrency=1)
    try:
        assert api.delete(f"/api/v1/jobs/{job.pk}/").status_code == 204  # publishes the purge after commit
        wait_for(lambda: not Execution.objects.filter(job_id=job.pk).exists(), timeout=60,
                 message="the worker to purge the history")
    finally:
        code = worker.stop()
    assert code == 0, worker.output()[-3000:]
    assert not Attempt.objects.filter(execution__job_id=job.pk).exists()
    assert Execution.objects.filter(pk=kept_run.pk).exists()
