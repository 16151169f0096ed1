"""The lists' hand-written pages (the unfiltered, default-ordered case) answer byte for byte
what the ORM's querysets answer: the same rows in the same order, the same totals and
links, within the caller's organization and projects."""

import pytest

from apps.accounts.apikeys import create_api_key
from apps.executions.history import job_api
from apps.jobs.models import JobDependency
from apps.projects.models import Project
from tests.api.conftest import key_client


def both_ways(client, url, monkeypatch):
    """The response to ``url`` through the fast path, then through the ORM's queryset."""
    fast = client.get(url)
    with monkeypatch.context() as patched:
        patched.setattr(job_api, "listed_jobs", lambda *args: None)
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


def test_a_key_limited_to_projects_lists_only_their_jobs(tenant, jobs, monkeypatch):
    key, full = create_api_key(tenant.organization, "one project")
    key.limited_to_projects = True
    key.save()
    key.projects.set([jobs["other"]])
    listed = every_page(key_client(full), "/api/v1/jobs/?page_size=1", monkeypatch)
    assert sorted(job["project"] for job in listed) == [str(jobs["other"].pk)] * 2
    key.projects.set([])
    assert assert_same(key_client(full), "/api/v1/jobs/", monkeypatch).json()["count"] == 0


def test_an_organization_without_jobs_lists_an_empty_page(api, other_tenant, make_job, monkeypatch):
    make_job(other_tenant)
    page = assert_same(api, "/api/v1/jobs/", monkeypatch).json()
    assert (page["count"], page["results"], page["next"]) == (0, [], None)

