"""A project's history (and the history narrowed to some projects or one job: a key limited
to projects, ``?project=``, ``?job=``) read by ListedExecutions, job by job or along the
organization's index, answers byte for byte what the ORM's queryset answers: the same rows in
the same order and fields, page after page in both directions."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from apps.accounts.apikeys import create_api_key
from apps.executions.history import api as history_api
from apps.executions.history import job_api
from apps.executions.models import Execution
from apps.projects.models import Project
from tests.api.conftest import key_client
from tests.api.test_list_fast_paths import make_runs

READS = ("per job", "organization's index", "ORM")


def responses(client, url, monkeypatch):
    """{read: response} of ``url`` read job by job, along the organization's index (both
    through ListedExecutions, whatever the job counts say) and through the ORM's queryset."""
    found = {}
    for read in READS:
        with monkeypatch.context() as patched:
            if read == "ORM":
                patched.setattr(job_api, "listed_executions", lambda *args, **kwargs: None)
                patched.setattr(history_api, "listed_executions", lambda *args, **kwargs: None)
            else:
                patched.setattr(history_api, "few_jobs", lambda *args, per_job=read == "per job": per_job)
            found[read] = client.get(url)
    return found


def assert_same(client, url, monkeypatch):
    found = responses(client, url, monkeypatch)
    orm = found["ORM"]
    for read in READS[:2]:
        assert (found[read].status_code, found[read].content) == (orm.status_code, orm.content), (read, url)
    return orm


def every_page(client, url, monkeypatch, *, meanwhile=None):
    """The runs of every page from ``url`` on, following ``next``, and of every page back from
    the last following ``previous`` (DRF's pages back need not be the pages forth: runs at
    the same time straddle them), each page the same all three ways; ``meanwhile`` is called
    after the first page (the history changing between pages)."""
    forwards, backwards, last = [], [], None
    while url:
        page = assert_same(client, url, monkeypatch).json()
        forwards += page["results"]
        last, url = page, page["next"]
        if meanwhile:
            meanwhile, _ = None, meanwhile()
    back = last and last["previous"]
    while back:
        page = assert_same(client, back, monkeypatch).json()
        backwards = page["results"] + backwards
        back = page["previous"]
    return forwards, backwards


@pytest.fixture
def history(tenant, other_tenant, make_job):
    """An organization of 12 jobs: a small project of 2 (one of them to be deleted), the
    default project's 8 and a third project's 2; runs of all of them at the same times
    (several at the same time: the id breaks the tie), some retried (the first attempt's
    start read from its Attempt row); another organization's runs at the same times."""
    from django.utils import timezone

    small = Project.objects.create(organization=tenant.organization, name="Small", slug="small")
    third = Project.objects.create(organization=tenant.organization, name="Third", slug="third")
    jobs = {"small": [make_job(tenant, project=small) for _ in range(2)],
            "large": [make_job(tenant) for _ in range(8)],
            "third": [make_job(tenant, project=third) for _ in range(2)]}
    theirs = make_job(other_tenant)
    now = timezone.now().replace(microsecond=0)
    when = [now - timedelta(minutes=minute) for minute in (1, 1, 1, 2, 3, 3, 4, 5)]
    make_runs((jobs["small"][0], *jobs["large"][:3], jobs["third"][0], theirs), when)
    make_runs(jobs["small"][1:], when[::2])  # the small project's jobs run unevenly
    return {"small": small, "third": third, "jobs": jobs, "theirs": theirs}


def test_a_small_and_a_large_projects_history_page_by_page_both_ways(api, history, monkeypatch):
    small, large = history["small"], history["jobs"]["large"][0].project
    forwards, _ = every_page(api, f"/api/v1/projects/{small.pk}/executions/?page_size=3", monkeypatch)
    assert len(forwards) == 12 and len({run["id"] for run in forwards}) == 12
    assert {run["job"] for run in forwards} == {str(job.pk) for job in history["jobs"]["small"]}
    forwards, _ = every_page(api, f"/api/v1/projects/{large.pk}/executions/?page_size=4", monkeypatch)
    assert len(forwards) == 24
    assert {run["job"] for run in forwards} == {str(job.pk) for job in history["jobs"]["large"][:3]}
    assert len(every_page(api, f"/api/v1/projects/{small.pk}/executions/", monkeypatch)[0]) == 12


def test_a_job_deleted_between_pages_leaves_the_projects_history(api, history, monkeypatch):
    small = history["small"]
    gone, kept = history["jobs"]["small"][1], history["jobs"]["small"][0]

    def delete():
        assert api.delete(f"/api/v1/jobs/{gone.pk}/").status_code == 204
        assert Execution.objects.filter(job_id=gone.pk).exists()  # its runs stay until purged

    forwards, backwards = every_page(api, f"/api/v1/projects/{small.pk}/executions/?page_size=2", monkeypatch,
                                     meanwhile=delete)
    assert {run["job"] for run in backwards} == {str(kept.pk)}
    assert {run["job"] for run in forwards[2:]} == {str(kept.pk)}
    assert not [run for run in every_page(api, "/api/v1/executions/?page_size=5", monkeypatch)[0]
                if run["job"] == str(gone.pk)]


def test_the_job_and_project_filters_narrow_the_history_as_the_orms(api, tenant, history, monkeypatch):
    small, job, theirs = history["small"], history["jobs"]["small"][0], history["theirs"]
    large_job = history["jobs"]["large"][1]
    pages = {
        f"?project={small.pk}": 12, f"?job={job.pk}": 8, f"?job={job.pk}&project={small.pk}": 8,
        f"?job={job.pk}&project={tenant.project.pk}": 0, f"?project={theirs.project.pk}": 0, f"?job={theirs.pk}": 0,
        f"?project={str(small.pk).upper()}&project=": 44,  # the last value counts, as the form reads it
        f"?project={small.pk.hex}": 12,
    }
    for query, count in pages.items():
        forwards, _ = every_page(api, f"/api/v1/executions/{query}&page_size=3", monkeypatch)
        assert len(forwards) == count, query
    for query in (f"?job={job.pk}", f"?project={small.pk}", f"?project={tenant.project.pk}", f"?job={large_job.pk}"):
        every_page(api, f"/api/v1/projects/{small.pk}/executions/{query}&page_size=5", monkeypatch)
        every_page(api, f"/api/v1/jobs/{job.pk}/executions/{query}&page_size=5", monkeypatch)
    for query in ("?project=nope", "?job=1", f"?project={small.pk}&status=failed", f"?job={job.pk}&q=x"):
        assert_same(api, f"/api/v1/executions/{query}", monkeypatch)  # the ORM's 400 or filtered page
    assert assert_same(api, "/api/v1/executions/?project=nope", monkeypatch).status_code == 400


def test_a_key_limited_to_projects_sees_only_their_history(tenant, history, monkeypatch):
    small, third = history["small"], history["third"]
    key, full = create_api_key(tenant.organization, "two projects", project_ids=[small.pk, third.pk])
    client = key_client(full)
    forwards, _ = every_page(client, "/api/v1/executions/?page_size=3", monkeypatch)
    assert len(forwards) == 20
    assert {run["job"] for run in forwards} == {str(job.pk) for job in (*history["jobs"]["small"],
                                                                            history["jobs"]["third"][0])}
    assert len(every_page(client, f"/api/v1/projects/{third.pk}/executions/?page_size=3", monkeypatch)[0]) == 8
    assert len(every_page(client, f"/api/v1/executions/?project={third.pk}&page_size=3", monkeypatch)[0]) == 8
    assert every_page(client, f"/api/v1/executions/?project={tenant.project.pk}", monkeypatch)[0] == []
    large_job = history["jobs"]["large"][0]
    assert every_page(client, f"/api/v1/executions/?job={large_job.pk}", monkeypatch)[0] == []
    assert assert_same(client, f"/api/v1/projects/{tenant.project.pk}/executions/", monkeypatch).status_code == 404
    key.projects.set([])
    assert every_page(client, "/api/v1/executions/", monkeypatch)[0] == []


def test_another_organizations_project_is_not_found(api, other_api, history, monkeypatch):
    theirs = history["theirs"].project
    assert assert_same(api, f"/api/v1/projects/{theirs.pk}/executions/", monkeypatch).status_code == 404
    assert len(every_page(other_api, f"/api/v1/projects/{theirs.pk}/executions/", monkeypatch)[0]) == 8


def page_statement(client, url):
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url).status_code == 200
    return next(q["sql"] for q in captured.captured_queries if "executions_execution" in q["sql"])


def test_few_jobs_of_many_are_read_job_by_job(api, tenant, history, make_job):
    """12 jobs: a project of 2 (2 x 2 <= 12) is read job by job, the default project's 8 and
    two projects' 10 along the organization's index; so is a project of 3 while the
    organization has fewer than 9 jobs."""
    small, large = history["small"], tenant.project
    assert "LATERAL" in page_statement(api, f"/api/v1/projects/{small.pk}/executions/")
    assert "LATERAL" not in page_statement(api, f"/api/v1/projects/{large.pk}/executions/")
    assert "LATERAL" in page_statement(api, f"/api/v1/executions/?project={small.pk}")
    key, full = create_api_key(tenant.organization, "two projects", project_ids=[small.pk, history["third"].pk])
    # 4 jobs: 16 > 12
    assert "LATERAL" not in page_statement(key_client(full), "/api/v1/executions/")
    key.projects.set([small])
    assert "LATERAL" in page_statement(key_client(full), "/api/v1/executions/")
    make_job(tenant, project=small)  # 3 jobs: 9 <= 13
    assert "LATERAL" in page_statement(api, f"/api/v1/projects/{small.pk}/executions/")
    for job in history["jobs"]["large"][:5]:
        assert api.delete(f"/api/v1/jobs/{job.pk}/").status_code == 204
    assert "LATERAL" not in page_statement(api, f"/api/v1/projects/{small.pk}/executions/")  # 9 > 8
