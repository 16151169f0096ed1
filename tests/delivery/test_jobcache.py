"""A worker keeps the jobs it sends for between batches (apps/executions/worker/jobcache.py): a
claim loads only the jobs it does not hold as they are now, and a changed job is sent as
changed from the next claim on."""

from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from apps.executions.worker import batch
from tests.delivery.test_grouping import queued


def _claimed_job(tenant, job):
    (execution,) = batch.claim([queued(tenant, job).id], timezone.now())
    return execution.job


def _job_queries(tenant, job):
    with CaptureQueriesContext(connection) as captured:
        _claimed_job(tenant, job)
    return [q["sql"] for q in captured if 'FROM "jobs_job"' in q["sql"].split(" WHERE ")[0]
            and "FOR UPDATE" not in q["sql"]]


def test_a_job_is_loaded_once_while_it_does_not_change(tenant, make_job):
    job = make_job(tenant, url="https://example.com/first")
    assert len(_job_queries(tenant, job)) == 1
    assert _job_queries(tenant, job) == []  # the second claim takes the job the process holds


def test_a_saved_job_is_claimed_as_it_now_is(tenant, make_job):
    job = make_job(tenant, url="https://example.com/first", headers={"X-A": "1"})
    assert _claimed_job(tenant, job).url == "https://example.com/first"
    job.url, job.headers = "https://example.com/second", {"X-A": "2"}
    job.save()
    claimed = _claimed_job(tenant, job)
    assert (claimed.url, claimed.headers) == ("https://example.com/second", {"X-A": "2"})


def test_a_new_version_is_claimed_as_it_now_is_even_with_the_same_updated_at(tenant, make_job):
    """The stamp is the version too: a change written with an old ``updated_at`` (an
    import, a rollback in the same clock tick) is not missed."""
    job = make_job(tenant, url="https://example.com/first")
    assert _claimed_job(tenant, job).url == "https://example.com/first"
    type(job).objects.filter(id=job.id).update(url="https://example.com/rolled-back", version=job.version + 1)
    assert _claimed_job(tenant, job).url == "https://example.com/rolled-back"


def test_a_changed_timeout_is_claimed_as_it_now_is(tenant, make_job):
    job = make_job(tenant, url="https://example.com/first", timeout_seconds=10)
    assert _claimed_job(tenant, job).timeout_seconds == 10
    job.timeout_seconds = 20
    job.save()
    (claimed,) = batch.claim([queued(tenant, job).id], timezone.now())
    assert claimed.job.timeout_seconds == 20


def test_a_save_of_some_fields_is_claimed_as_it_now_is(tenant, make_job):
    """``save(update_fields=[...])`` moves updated_at too (Job.save), so the cache reloads."""
    job = make_job(tenant, url="https://example.com/first")
    assert _claimed_job(tenant, job).url == "https://example.com/first"
    job.url = "https://example.com/fixed"
    job.save(update_fields=["url"])
    assert _claimed_job(tenant, job).url == "https://example.com/fixed"


def test_a_run_whose_job_vanished_before_the_cache_loaded_it_is_left_out(tenant, make_job, monkeypatch):
    """A job deleted between the claim's statement and the cache's load: its run is left
    out of the batch (not a KeyError that rolls back the claim of the whole message)."""
    kept, gone = make_job(tenant, url="https://example.com/kept"), make_job(tenant, url="https://example.com/gone")
    cache = batch._job_cache()
    load = cache.current
    monkeypatch.setattr(cache, "current", lambda stamps: {k: v for k, v in load(stamps).items() if k != gone.id})
    claimed = batch.claim([queued(tenant, kept).id, queued(tenant, gone).id], timezone.now())
    assert [execution.job.url for execution in claimed] == ["https://example.com/kept"]


def test_a_loaded_job_has_every_column_as_the_orm_reads_it(tenant, make_job):
    """The cache loads whole rows by hand-written SQL: decrypted secrets, JSON and every
    other column are those the ORM gives, and none is left to a query of its own."""
    from apps.jobs.models import Job

    job = make_job(tenant, url="https://example.com/whole", headers={"X-A": "1"},
                   secret_headers={"X-Token": "s3cret"}, auth={"type": "basic", "username": "u", "password": "p"})
    claimed = _claimed_job(tenant, job)
    expected = Job.objects.get(id=job.id)
    for field in Job._meta.concrete_fields:
        assert getattr(claimed, field.attname) == getattr(expected, field.attname), field.name
    assert claimed.get_deferred_fields() == set()
