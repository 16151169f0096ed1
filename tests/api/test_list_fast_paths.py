"""The lists' hand-written pages (the unfiltered, default-ordered case) answer byte for byte
what the ORM's querysets answer: the same rows in the same order, the same totals and
links, within the caller's organization and projects."""

import base64
from datetime import timedelta

import pytest

from apps.accounts.apikeys import create_api_key
from apps.executions.history import api as history_api, job_api
from apps.executions.models import Attempt, DeletedJob, Execution
from apps.jobs.models import JobDependency
from apps.projects.models import Project
from tests.api.conftest import key_client


def both_ways(client, url, monkeypatch):
    """The response to ``url`` through the fast path, then through the ORM's queryset."""
    fast = client.get(url)
    with monkeypatch.context() as patched:
        patched.setattr(job_api, "listed_jobs", lambda *args: None)
        patched.setattr(job_api, "listed_executions", lambda *args: None)
        patched.setattr(history_api, "listed_executions", lambda *args: None)
        slow = client.get(url)
    return fast, slow


def assert_same(client, url, monkeypatch):
    fast, slow = both_ways(client, url, monkeypatch)
    assert (fast.status_code, fast.content) == (slow.status_code, slow.content), url
    return fast


def every_page(client, url, monkeypatch):
    """Every page from ``url`` on, following ``next``, then back from the last following
    ``previous`` (cursor pages): each as the ORM's."""
    listed, last = [], None
    while url:
        page = assert_same(client, url, monkeypatch).json()
        listed += page["results"]
        last, url = page, page["next"]
    back = last and last.get("previous") if last and "count" not in last else None
    while back:
        back = assert_same(client, back, monkeypatch).json()["previous"]
    return listed


@pytest.fixture
def jobs(tenant, other_tenant, make_job):
    """Jobs of two projects (names repeated: the id breaks the tie), one link, and another
    organization's job of the same name."""
    other = Project.objects.create(organization=tenant.organization, name="Other")
    made = [make_job(tenant, name=name) for name in ("b", "a", "b", "c", "a")]
    made += [make_job(tenant, name=name, project=other) for name in ("a", "d")]
    JobDependency.objects.create(upstream=made[0], downstream=made[5], on="success")
    make_job(other_tenant, name="a")
    return {"made": made, "other": other}


def test_the_jobs_list_pages_are_the_orms(api, jobs, monkeypatch):
    listed = every_page(api, "/api/v1/jobs/?page_size=2", monkeypatch)
    assert len(listed) == 7 and [job["name"] for job in listed] == ["a", "a", "a", "b", "b", "c", "d"]
    assert_same(api, "/api/v1/jobs/", monkeypatch)
    assert_same(api, "/api/v1/jobs/?page_size=3&page=3", monkeypatch)
    assert assert_same(api, "/api/v1/jobs/?page=9", monkeypatch).status_code == 404


@pytest.fixture
def other_project_key(tenant, jobs):
    """A key limited to the project "Other", and its client."""
    key, full = create_api_key(tenant.organization, "one project")
    key.limited_to_projects = True
    key.save()
    key.projects.set([jobs["other"]])
    return key, key_client(full)


def test_a_key_limited_to_projects_lists_only_their_jobs(jobs, other_project_key, monkeypatch):
    key, client = other_project_key
    listed = every_page(client, "/api/v1/jobs/?page_size=1", monkeypatch)
    assert sorted(job["project"] for job in listed) == [str(jobs["other"].pk)] * 2
    key.projects.set([])
    assert assert_same(client, "/api/v1/jobs/", monkeypatch).json()["count"] == 0


def test_an_organization_without_jobs_lists_an_empty_page(api, other_tenant, make_job, monkeypatch):
    make_job(other_tenant)
    page = assert_same(api, "/api/v1/jobs/", monkeypatch).json()
    assert (page["count"], page["results"], page["next"]) == (0, [], None)


TRIGGERS = ("schedule", "manual", "replay")  # runs of a job at the same time: another trigger each


def make_runs(jobs, when):
    """Runs of each job at each time of ``when`` (at the same time, another trigger each),
    every other one retried: its first attempt's start read from its Attempt row."""
    for index, at in enumerate(when):
        for job in jobs:
            run = Execution.objects.create(job=job, organization=job.organization, status="succeeded",
                                           scheduled_for=at, started_at=at + timedelta(seconds=2),
                                           attempt=index % 2, trigger=TRIGGERS[index % 3])
            if run.attempt:
                Attempt.objects.create(execution=run, number=1, started_at=at + timedelta(seconds=index),
                                       request_method="GET", request_url="https://example.com", outcome="failure")


@pytest.fixture
def runs(tenant, other_tenant, jobs, make_job):
    """Runs of jobs in both projects, several at the same time (the id breaks the tie), some
    retried (the first attempt's start read from its Attempt row), runs of a deleted job
    still being purged, and another organization's runs."""
    from django.utils import timezone

    made, now = jobs["made"], timezone.now().replace(microsecond=0)
    make_runs((made[0], made[5]), [now - timedelta(minutes=minute) for minute in (1, 1, 1, 2, 3, 3, 4)])
    gone = make_job(tenant, name="gone")
    Execution.objects.create(job=gone, organization=tenant.organization, status="failed", scheduled_for=now)
    DeletedJob.objects.create(job_id=gone.pk, organization=tenant.organization)
    theirs = make_job(other_tenant)
    Execution.objects.create(job=theirs, organization=other_tenant.organization, status="failed", scheduled_for=now)
    return jobs


def test_the_history_pages_are_the_orms_forwards_and_back(api, runs, monkeypatch):
    listed = every_page(api, "/api/v1/executions/?page_size=3", monkeypatch)
    assert len(listed) == 14 and len({run["id"] for run in listed}) == 14
    assert {run["job"] for run in listed} == {str(runs["made"][0].pk), str(runs["made"][5].pk)}
    assert len(every_page(api, "/api/v1/executions/", monkeypatch)) == 14
    job = runs["made"][0]
    assert len(every_page(api, f"/api/v1/jobs/{job.pk}/executions/?page_size=2", monkeypatch)) == 7
    filtered = assert_same(api, "/api/v1/executions/?page_size=3&status=succeeded", monkeypatch)  # the ORM's
    forged = base64.b64encode(b"o=1&r=1&p=2000-01-01 00:00:00%2B00:00").decode()  # back from long ago
    assert_same(api, f"/api/v1/executions/?cursor={forged}", monkeypatch)
    bad = base64.b64encode(b"p=not-a-time").decode()  # a forged position: bad input on both paths, never a 500
    refused = assert_same(api, f"/api/v1/executions/?cursor={bad}", monkeypatch)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_cursor"
    assert len(filtered.json()["results"]) == 3


def test_a_key_limited_to_projects_sees_only_their_history(runs, other_project_key, monkeypatch):
    key, client = other_project_key
    listed = every_page(client, "/api/v1/executions/?page_size=4", monkeypatch)
    assert {run["job"] for run in listed} == {str(runs["made"][5].pk)} and len(listed) == 7
    key.projects.set([])
    assert assert_same(client, "/api/v1/executions/", monkeypatch).json()["results"] == []


def test_a_job_without_runs_and_an_organization_without_history_list_empty_pages(api, tenant, runs, monkeypatch):
    quiet = runs["made"][1]
    page = assert_same(api, f"/api/v1/jobs/{quiet.pk}/executions/", monkeypatch).json()
    assert (page["results"], page["next"], page["previous"]) == ([], None, None)
    Execution.objects.filter(organization=tenant.organization).delete()
    assert assert_same(api, "/api/v1/executions/", monkeypatch).json()["results"] == []
