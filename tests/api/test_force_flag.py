"""``?force=`` reads the same on every delete that takes it (jobs with dependents, projects
with jobs): the same spellings mean yes or no, and any other is refused, not taken as no."""

import pytest

from apps.jobs.models import Job, JobDependency
from apps.projects.models import Project
from tests.api.conftest import error_of

YES = ["true", "True", "TRUE", "1"]
NO = ["false", "FALSE", "0", ""]
REFUSED = ["yes", "no", "on", "2", "t", "true "]


@pytest.fixture(params=["job", "project"])
def guarded(request, tenant, make_job):
    """(URL, exists) of an object whose delete needs ?force: a job another job depends on, or
    a project with a job."""
    job = make_job(tenant)
    if request.param == "job":
        JobDependency.objects.create(upstream=job, downstream=make_job(tenant))
        return f"/api/v1/jobs/{job.pk}/", lambda: Job.objects.filter(pk=job.pk).exists()
    project = tenant.project
    return f"/api/v1/projects/{project.pk}/", lambda: Project.objects.filter(pk=project.pk).exists()


@pytest.mark.parametrize("value", YES)
def test_force_yes_deletes(api, guarded, value):
    url, exists = guarded
    assert api.delete(f"{url}?force={value}").status_code == 204
    assert not exists()


@pytest.mark.parametrize("value", NO)
def test_force_no_is_a_conflict(api, guarded, value):
    url, exists = guarded
    assert api.delete(f"{url}?force={value}").status_code == 409
    assert exists()


@pytest.mark.parametrize("value", REFUSED)
def test_other_spellings_are_refused(api, guarded, value):
    url, exists = guarded
    response = api.delete(f"{url}?force={value}")
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid_flag" and list(error["fields"]) == ["force"]
    assert "true" in error["message"] and "false" in error["message"]
    assert exists()


@pytest.mark.parametrize("kind", ["job", "project"])
def test_a_refused_spelling_is_refused_even_when_nothing_needs_force(api, tenant, make_job, kind):
    url = (f"/api/v1/jobs/{make_job(tenant).pk}/" if kind == "job"
           else f"/api/v1/projects/{Project.objects.create(organization=tenant.organization, name='Empty').pk}/")
    response = api.delete(f"{url}?force=yes")
    assert response.status_code == 400 and error_of(response)["code"] == "invalid_flag"


# The project page's "also delete its jobs" checkbox reads as the API's ?force=.


def _project_page_delete(tenant, make_job, value):
    from django.test import Client

    make_job(tenant)
    browser = Client()
    browser.force_login(tenant.owner)
    response = browser.post(f"/settings/projects/{tenant.project.pk}/delete/", {"force": value}, follow=True)
    return response, Project.objects.filter(pk=tenant.project.pk).exists()


@pytest.mark.parametrize("value", YES)
def test_the_page_reads_force_yes_as_the_api_does(tenant, make_job, value):
    response, exists = _project_page_delete(tenant, make_job, value)
    assert not exists


@pytest.mark.parametrize("value", NO)
def test_the_page_reads_force_no_as_the_api_does(tenant, make_job, value):
    response, exists = _project_page_delete(tenant, make_job, value)
    assert exists and "still has 1 job" in response.content.decode()


@pytest.mark.parametrize("value", ["yes", "on"])
def test_the_page_refuses_what_the_api_refuses(tenant, make_job, value):
    response, exists = _project_page_delete(tenant, make_job, value)
    assert exists and "is not a yes/no value" in response.content.decode()
