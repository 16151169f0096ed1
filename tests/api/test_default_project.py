"""A job (or a crontab import) without ``project``: the one project the caller reaches is
used; with several, 400 ``project_required`` naming them; never another tenant's."""

import pytest

from apps.jobs.models import Job
from apps.projects.models import Project
from tests.api.conftest import error_of, job_body

IMPORT = "/api/v1/jobs/import-crontab/"
CRONTAB = "0 3 * * * curl -X POST https://example.com/hook\n"


def body_without_project(tenant):
    body = job_body(tenant)
    del body["project"]
    return body


def add_project(tenant, name):
    return Project.objects.create(organization=tenant.organization, name=name, slug=name.lower().replace(" ", "-"))


def limited_key(make_key, tenant, projects):
    key, client = make_key(tenant)
    key.limited_to_projects = True
    key.save()
    key.projects.set(projects)
    return client


def test_the_organizations_only_project_is_used(api, tenant, other_tenant):
    response = api.post("/api/v1/jobs/", body_without_project(tenant))
    assert response.status_code == 201, response.json()
    assert response.json()["project"] == str(tenant.project.pk)
    assert Job.objects.get(pk=response.json()["id"]).project_id == tenant.project.pk


def test_a_key_limited_to_one_project_uses_it(make_key, tenant):
    ops = add_project(tenant, "Ops")
    add_project(tenant, "Zeta")
    client = limited_key(make_key, tenant, [ops])
    response = client.post("/api/v1/jobs/", body_without_project(tenant))
    assert response.status_code == 201, response.json()
    assert response.json()["project"] == str(ops.pk)


def test_several_projects_answer_project_required_naming_them(api, tenant, other_tenant):
    ops = add_project(tenant, "Ops")
    response = api.post("/api/v1/jobs/", body_without_project(tenant))
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "project_required"
    assert error["choices"] == [{"id": str(tenant.project.pk), "name": "Default"},
                                {"id": str(ops.pk), "name": "Ops"}]
    assert "Default" in error["message"] and str(ops.pk) in error["message"]
    assert set(error["fields"]) == {"project"}
    assert str(other_tenant.project.pk) not in response.content.decode()
    assert not Job.objects.filter(organization=tenant.organization).exists()


def test_a_key_limited_to_several_projects_is_offered_only_those(make_key, tenant, other_tenant):
    ops, web = add_project(tenant, "Ops"), add_project(tenant, "Web")
    client = limited_key(make_key, tenant, [ops, web])
    error = error_of(client.post("/api/v1/jobs/", body_without_project(tenant)))
    assert error["code"] == "project_required"
    assert [choice["id"] for choice in error["choices"]] == [str(ops.pk), str(web.pk)]
    text = str(error)
    assert str(tenant.project.pk) not in text and str(other_tenant.project.pk) not in text


def test_no_reachable_project_says_to_create_one(make_key, tenant):
    client = limited_key(make_key, tenant, [])
    error = error_of(client.post("/api/v1/jobs/", body_without_project(tenant)))
    assert error["code"] == "project_required"
    assert error["choices"] == []
    assert "POST /api/v1/projects/" in error["message"]


def test_many_projects_are_named_up_to_a_bound(api, tenant):
    from apps.jobs.serializers import CHOICES_SHOWN

    for n in range(CHOICES_SHOWN + 1):
        add_project(tenant, f"P{n:02d}")
    error = error_of(api.post("/api/v1/jobs/", body_without_project(tenant)))
    assert len(error["choices"]) == CHOICES_SHOWN
    assert "GET /api/v1/projects/" in error["message"]


def test_other_field_errors_are_reported_beside_project_required(api, tenant):
    add_project(tenant, "Ops")
    error = error_of(api.post("/api/v1/jobs/", {"name": "x"}))
    assert error["code"] == "project_required"
    assert set(error["fields"]) == {"project", "schedule", "request"}


def test_a_replace_without_project_keeps_the_jobs_project(api, tenant, make_job):
    ops = add_project(tenant, "Ops")
    job = make_job(tenant, project=ops)
    response = api.put(f"/api/v1/jobs/{job.pk}/", body_without_project(tenant))
    assert response.status_code == 200, response.json()
    assert response.json()["project"] == str(ops.pk)


def test_a_given_project_still_wins(api, tenant):
    ops = add_project(tenant, "Ops")
    response = api.post("/api/v1/jobs/", job_body(tenant, project=str(ops.pk)))
    assert response.status_code == 201 and response.json()["project"] == str(ops.pk)


def test_crontab_import_uses_the_only_project(api, tenant):
    response = api.post(IMPORT, {"crontab": CRONTAB, "dry_run": False})
    assert response.status_code == 201, response.json()
    assert Job.objects.get(pk=response.json()["jobs"][0]["id"]).project_id == tenant.project.pk


def test_crontab_import_with_several_projects_answers_project_required(api, tenant):
    ops = add_project(tenant, "Ops")
    error = error_of(api.post(IMPORT, {"crontab": CRONTAB}))
    assert error["code"] == "project_required"
    assert [choice["id"] for choice in error["choices"]] == [str(tenant.project.pk), str(ops.pk)]


@pytest.mark.parametrize("component", ["JobRequest", "ImportCrontabRequest"])
def test_the_schema_shows_project_as_optional(api, component):
    schema = api.get("/api/v1/schema/?format=json").json()["components"]["schemas"][component]
    assert "project" in schema["properties"]
    assert "project" not in schema.get("required", [])


def test_the_error_schema_documents_choices(api):
    error = api.get("/api/v1/schema/?format=json").json()["components"]["schemas"]["Error"]
    assert "choices" in error["properties"]["error"]["properties"]
    assert "`project_required`" in error["properties"]["error"]["properties"]["code"]["description"]
