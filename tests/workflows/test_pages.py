"""Pages: the job page's upstream and downstream jobs, the workflow-run graph, the form."""

import pytest

from apps.executions.models import Execution
from apps.executions.scheduling.triggers import trigger_now
from apps.jobs.models import Job, JobDependency
from tests.web.conftest import _private_web_counters, job_form, web_client  # noqa: F401 (fixtures)

from .conftest import finish

pytestmark = pytest.mark.django_db


@pytest.fixture
def owner(tenant, web_client):
    return web_client(tenant)


def test_the_job_page_links_upstream_and_downstream_jobs(tenant, owner, chain):
    jobs = chain(tenant, "Extract", ("Transform", [("Extract", "success")]), ("Load", [("Transform", "failure")]))
    page = owner.get(f"/jobs/{jobs['Transform'].pk}/").content.decode()
    assert f'href="/jobs/{jobs["Extract"].pk}/">Extract</a>' in page
    assert f'href="/jobs/{jobs["Load"].pk}/">Load</a>' in page
    assert "runs only after its upstream jobs" in page


def test_the_workflow_run_page_draws_the_chain_with_statuses(tenant, other_tenant, owner, web_client, chain):
    jobs = chain(tenant, "Extract", ("<Transform>", [("Extract", "success")]), ("Load", [("<Transform>", "success")]))
    first = finish(trigger_now(jobs["Extract"]), "succeeded")
    finish(Execution.objects.get(job=jobs["<Transform>"]), "failed")
    response = owner.get(f"/workflow-runs/{first.id}/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "<svg" in page and page.count('class="node ') == 3
    for status in ("succeeded", "failed", "skipped"):
        assert f'data-status="{status}"' in page
    assert "&lt;Transform&gt;" in page and "<Transform>" not in page  # labels are escaped
    assert page.count('<line class="edge"') == 2
    detail = owner.get(f"/executions/{first.id}/").content.decode()
    assert f'href="/workflow-runs/{first.id}/"' in detail
    assert web_client(other_tenant).get(f"/workflow-runs/{first.id}/").status_code == 404


def test_the_form_saves_dependencies_and_a_job_without_schedule(tenant, owner, make_job):
    upstream = make_job(tenant, name="Extract")
    form = job_form(tenant, name="Load", schedule_mode="none", dependency_mode="any",
                    dependency_job=[str(upstream.pk), ""], dependency_on=["failure", "success"])
    response = owner.post("/jobs/new/", form)
    assert response.status_code == 302, response.content.decode()[-3000:]
    job = Job.objects.get(name="Load")
    assert (job.schedule_type, job.next_run_at, job.dependency_mode) == ("none", None, "any")
    assert list(JobDependency.objects.filter(downstream=job).values_list("upstream_id", "on")) == [
        (upstream.pk, "failure")]
    edit = owner.get(f"/jobs/{job.pk}/edit/").content.decode()
    assert f'<option value="{upstream.pk}" selected>' in edit
    assert 'value="none" checked' in edit


def test_the_form_shows_a_cycle_beside_the_dependencies(tenant, owner, chain):
    jobs = chain(tenant, "A", ("B", [("A", "success")]))
    form = job_form(tenant, name="A", dependency_job=[str(jobs["B"].pk)], dependency_on=["success"])
    response = owner.post(f"/jobs/{jobs['A'].pk}/edit/", form)
    assert response.status_code == 400
    page = response.content.decode()
    assert 'id="id_dependencies-error"' in page and "A → B → A would be a cycle" in page


def test_the_delete_page_names_the_dependents(tenant, owner, chain):
    jobs = chain(tenant, "Extract", ("Load", [("Extract", "success")]))
    page = owner.get(f"/jobs/{jobs['Extract'].pk}/delete/").content.decode()
    assert "will lose that dependency" in page and f'href="/jobs/{jobs["Load"].pk}/">Load</a>' in page
