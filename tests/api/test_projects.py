"""/api/v1/projects/."""

from apps.accounts.models import AuditEvent
from apps.projects.models import Project
from tests.api.conftest import error_of


def test_create_read_update(api, tenant):
    response = api.post("/api/v1/projects/", {"name": "Billing Jobs", "timezone": "Europe/Paris"})
    assert response.status_code == 201, response.json()
    project = response.json()
    assert (project["slug"], project["timezone"], project["job_count"]) == ("billing-jobs", "Europe/Paris", 0)
    assert api.get(f"/api/v1/projects/{project['id']}/").json() == project
    renamed = api.patch(f"/api/v1/projects/{project['id']}/", {"name": "Billing"}).json()
    assert (renamed["name"], renamed["slug"]) == ("Billing", "billing-jobs")


def test_list_search_and_counts(api, tenant, make_job):
    make_job(tenant)
    Project.objects.create(organization=tenant.organization, name="Zeta", slug="zeta")
    page = api.get("/api/v1/projects/").json()
    assert [(p["name"], p["job_count"]) for p in page["results"]] == [("Default", 1), ("Zeta", 0)]
    assert [p["name"] for p in api.get("/api/v1/projects/?search=zet").json()["results"]] == ["Zeta"]


def test_validation(api, tenant):
    bad_zone = api.post("/api/v1/projects/", {"name": "X", "timezone": "Not/AZone"})
    assert error_of(bad_zone)["code"] == "unknown_timezone"
    taken = api.post("/api/v1/projects/", {"name": "Default"})
    assert taken.status_code == 400 and error_of(taken)["code"] == "unique"


def test_delete_with_jobs_needs_force(api, tenant, make_job):
    make_job(tenant)
    response = api.delete(f"/api/v1/projects/{tenant.project.pk}/")
    assert response.status_code == 409
    assert error_of(response)["code"] == "project_not_empty"
    assert api.delete(f"/api/v1/projects/{tenant.project.pk}/?force=true").status_code == 204
    assert not Project.objects.filter(pk=tenant.project.pk).exists()
    assert AuditEvent.objects.filter(action="project.delete", data__jobs=1).exists()


def test_empty_project_deletes_without_force(api, tenant):
    project = Project.objects.create(organization=tenant.organization, name="Empty", slug="empty")
    assert api.delete(f"/api/v1/projects/{project.pk}/").status_code == 204
