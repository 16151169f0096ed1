"""The API: dependencies on the job representation, refusals, and /workflow-runs/{id}/."""

import uuid

import pytest

from apps.executions.models import Execution
from apps.executions.scheduling.triggers import trigger_now
from apps.jobs.models import JobDependency
from apps.projects.models import Project
from tests.api.conftest import error_of, job_body, key_client

from .conftest import finish

pytestmark = pytest.mark.django_db


def create(api, tenant, name, **overrides):
    response = api.post("/api/v1/jobs/", job_body(tenant, name=name, **overrides), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_a_job_without_schedule_runs_after_its_upstreams(api, tenant):
    a = create(api, tenant, "Extract")
    b = create(api, tenant, "Load", schedule={"type": "none"}, dependencies=[{"job": a["id"], "on": "failure"}],
               dependency_mode="any")
    assert (b["schedule"]["type"], b["next_run_at"], b["expired_at"]) == ("none", None, None)
    assert b["dependencies"] == [{"job": a["id"], "on": "failure"}]
    assert b["dependency_mode"] == "any"
    assert b["description_human"] == "Runs when its upstream jobs trigger it"
    upstream = api.get(f"/api/v1/jobs/{a['id']}/").json()
    assert upstream["dependents"] == [{"job": b["id"], "name": "Load", "on": "failure"}]
    # omitted: kept; [] removes them (and a job with no schedule then needs one)
    assert api.patch(f"/api/v1/jobs/{b['id']}/", {"name": "Load 2"}, format="json").json()["dependencies"] == [
        {"job": a["id"], "on": "failure"}]
    refused = api.patch(f"/api/v1/jobs/{b['id']}/", {"dependencies": []}, format="json")
    assert (refused.status_code, error_of(refused)["code"]) == (400, "no_schedule")
    cron = {"type": "cron", "expression": "0 * * * *"}
    cleared = api.patch(f"/api/v1/jobs/{b['id']}/", {"dependencies": [], "schedule": cron}, format="json")
    assert cleared.status_code == 200 and cleared.json()["dependencies"] == []
    assert not JobDependency.objects.exists()


def test_dependencies_default_to_on_success(api, tenant):
    a = create(api, tenant, "A")
    b = create(api, tenant, "B", dependencies=[{"job": a["id"]}])
    assert b["dependencies"] == [{"job": a["id"], "on": "success"}]


def test_a_cycle_is_refused_naming_it(api, tenant):
    a = create(api, tenant, "A")
    b = create(api, tenant, "B", dependencies=[{"job": a["id"]}])
    c = create(api, tenant, "C", dependencies=[{"job": b["id"]}])
    refused = api.patch(f"/api/v1/jobs/{a['id']}/", {"dependencies": [{"job": c["id"]}]}, format="json")
    error = error_of(refused)
    assert (refused.status_code, error["code"]) == (400, "dependency_cycle")
    assert "A → B → C → A" in error["message"]
    itself = api.patch(f"/api/v1/jobs/{a['id']}/", {"dependencies": [{"job": a["id"]}]}, format="json")
    assert error_of(itself)["code"] == "dependency_cycle" and "A → A" in error_of(itself)["message"]
    assert not JobDependency.objects.filter(downstream_id=a["id"]).exists()


def test_dependencies_stay_inside_one_project(api, tenant, other_tenant):
    other_project = Project.objects.create(organization=tenant.organization, name="Other", slug="other")
    a = create(api, tenant, "A", project=str(other_project.pk))
    refused = api.post("/api/v1/jobs/", job_body(tenant, name="B", dependencies=[{"job": a["id"]}]), format="json")
    assert (refused.status_code, error_of(refused)["code"]) == (400, "cross_project_dependency")
    foreign = key_client(other_tenant.full_api_key).post(
        "/api/v1/jobs/", job_body(other_tenant, name="B", dependencies=[{"job": a["id"]}]), format="json")
    assert (foreign.status_code, error_of(foreign)["code"]) == (400, "does_not_exist")


def test_bad_dependency_input_is_a_400(api, tenant):
    a = create(api, tenant, "A")
    for dependencies in ([{"job": a["id"], "on": "sometimes"}], [{"job": "nope"}], [{"job": a["id"], "x": 1}],
                         [{"job": a["id"]}, {"job": a["id"]}], "A", [{"job": str(uuid.uuid4())}]):
        response = api.post("/api/v1/jobs/", job_body(tenant, name="B", dependencies=dependencies), format="json")
        assert response.status_code == 400, (dependencies, response.json())
    for schedule in ({"type": "none", "every": 1}, {"type": "none", "timezone": "Mars/Base"}):
        response = api.post("/api/v1/jobs/", job_body(tenant, name="B", schedule=schedule,
                                                      dependencies=[{"job": a["id"]}]), format="json")
        assert response.status_code == 400, response.json()
    no_upstream = api.post("/api/v1/jobs/", job_body(tenant, name="B", schedule={"type": "none"}), format="json")
    assert error_of(no_upstream)["code"] == "no_schedule"


def test_deleting_an_upstream_names_its_dependents_unless_forced(api, tenant):
    a = create(api, tenant, "A")
    b = create(api, tenant, "B", dependencies=[{"job": a["id"]}])
    refused = api.delete(f"/api/v1/jobs/{a['id']}/")
    assert (refused.status_code, error_of(refused)["code"]) == (409, "has_dependents")
    assert error_of(refused)["dependents"] == [{"job": b["id"], "name": "B", "on": "success"}]
    assert api.delete(f"/api/v1/jobs/{a['id']}/?force=true").status_code == 204
    assert api.get(f"/api/v1/jobs/{b['id']}/").json()["dependencies"] == []


def test_pausing_an_upstream_lists_its_dependents(api, tenant):
    a = create(api, tenant, "A")
    b = create(api, tenant, "B", dependencies=[{"job": a["id"]}])
    paused = api.post(f"/api/v1/jobs/{a['id']}/pause/")
    assert paused.status_code == 200
    assert paused.json()["dependents"] == [{"job": b["id"], "name": "B", "on": "success"}]


def test_workflow_run_lists_every_execution_in_order(api, tenant, other_tenant, chain):
    jobs = chain(tenant, "A", ("B", [("A", "success")]), ("C", [("B", "success")]))
    first = trigger_now(jobs["A"])
    early = api.get(f"/api/v1/workflow-runs/{first.id}/")
    assert early.status_code == 200 and early.json()["status"] == "running"  # found by its first execution
    first = finish(first, "succeeded")
    finish(Execution.objects.get(job=jobs["B"]), "failed")
    run = api.get(f"/api/v1/workflow-runs/{first.id}/").json()
    assert [(e["job_name"], e["status"], e["trigger"]) for e in run["executions"]] == [
        ("A", "succeeded", "manual"), ("B", "failed", "dependency"), ("C", "skipped", "dependency")]
    assert run["executions"][2]["skip_reason"] == "upstream_failed"
    assert all(e["workflow_run_id"] == str(first.id) for e in run["executions"])
    assert run["status"] == "failed"
    assert {(e["upstream"], e["downstream"]) for e in run["edges"]} == {
        (str(jobs["A"].id), str(jobs["B"].id)), (str(jobs["B"].id), str(jobs["C"].id))}
    execution = api.get(f"/api/v1/executions/{run['executions'][1]['id']}/").json()
    assert execution["upstream_executions"] == [str(first.id)]
    # another organization's run, an unknown id, a malformed id: 404
    other = key_client(other_tenant.full_api_key).get(f"/api/v1/workflow-runs/{first.id}/")
    assert (other.status_code, error_of(other)["code"]) == (404, "not_found")
    assert api.get(f"/api/v1/workflow-runs/{uuid.uuid4()}/").status_code == 404
    assert api.get("/api/v1/workflow-runs/------------------------------------/").status_code == 404


def test_workflow_run_is_in_the_schema(api):
    schema = api.get("/api/v1/schema/?format=json")
    assert schema.status_code == 200
    assert "/api/v1/workflow-runs/{id}/" in schema.json()["paths"]
