"""Status badges: created through the API, served publicly as SVG by an unguessable token,
showing up / failing / paused and nothing else."""

import pytest
from django.test import Client

from apps.badges.models import Badge
from tests.api.conftest import error_of

pytestmark = pytest.mark.django_db


def svg_of(url):
    path = url.split("://", 1)[1].split("/", 1)[1]
    return Client().get("/" + path)  # anonymous: no session, no key


def test_create_and_read_a_job_badge(api, make_job, tenant):
    job = make_job(tenant)
    assert api.get(f"/api/v1/jobs/{job.pk}/badge/").status_code == 404
    created = api.post(f"/api/v1/jobs/{job.pk}/badge/")
    assert created.status_code == 201
    body = created.json()
    assert body["state"] == "up" and body["job"] == str(job.pk) and body["project"] is None
    assert body["url"].endswith(".svg") and body["markdown"] == f"![cron status]({body['url']})"
    again = api.post(f"/api/v1/jobs/{job.pk}/badge/")
    assert again.status_code == 200 and again.json()["url"] == body["url"]
    assert api.get(f"/api/v1/jobs/{job.pk}/badge/").json()["url"] == body["url"]
    token = Badge.objects.get(job=job).token
    assert len(token) >= 24  # 18 random bytes


@pytest.mark.parametrize("fields, state, colour", [
    ({}, "up", "#4c1"),
    ({"consecutive_failures": 2}, "failing", "#e05d44"),
    ({"enabled": False, "disabled_reason": "25 failures in a row"}, "failing", "#e05d44"),
    ({"enabled": False}, "paused", "#9f9f9f"),
])
def test_job_badge_states(api, make_job, tenant, fields, state, colour):
    job = make_job(tenant, name="Secret payroll export", **fields)
    url = api.post(f"/api/v1/jobs/{job.pk}/badge/").json()["url"]
    response = svg_of(url)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("image/svg+xml")
    assert response["Cache-Control"] == "max-age=60"
    text = response.content.decode()
    assert text.startswith("<svg") and f">{state}</text>" in text and colour in text
    for private in (job.name, str(job.pk), tenant.organization.name, tenant.project.name, job.url):
        assert private not in text


def test_project_badge(api, make_job, tenant):
    created = api.post("/api/v1/badges/", {"project": str(tenant.project.pk)})
    assert created.status_code == 201
    url = created.json()["url"]
    assert ">paused</text>" in svg_of(url).content.decode()  # no job yet
    job = make_job(tenant)
    make_job(tenant, enabled=False)
    assert ">up</text>" in svg_of(url).content.decode()
    job.consecutive_failures = 1
    job.save()
    assert ">failing</text>" in svg_of(url).content.decode()
    assert api.post("/api/v1/badges/", {"project": str(tenant.project.pk)}).status_code == 200


def test_unknown_and_revoked_tokens(api, make_job, tenant):
    assert Client().get("/badge/notatoken000000000000000.svg").status_code == 404
    created = api.post("/api/v1/badges/", {"job": str(make_job(tenant).pk)}).json()
    assert svg_of(created["url"]).status_code == 200
    assert [b["id"] for b in api.get("/api/v1/badges/").json()["results"]] == [created["id"]]
    assert api.delete(f"/api/v1/badges/{created['id']}/").status_code == 204
    response = svg_of(created["url"])
    assert response.status_code == 404 and b"svg" not in response.content


def test_badge_input_errors(api, make_job, tenant):
    job = make_job(tenant)
    both = api.post("/api/v1/badges/", {"job": str(job.pk), "project": str(tenant.project.pk)})
    assert both.status_code == 400 and error_of(both)["code"] == "job_or_project"
    assert error_of(api.post("/api/v1/badges/", {}))["code"] == "job_or_project"
    assert api.post("/api/v1/badges/", {"job": "x"}).status_code == 400
    assert error_of(api.post("/api/v1/badges/", {"color": "red", "job": str(job.pk)}))["code"] == "unknown_field"


def test_tenancy(api, other_api, make_job, tenant, other_tenant):
    theirs = make_job(other_tenant)
    assert api.get(f"/api/v1/jobs/{theirs.pk}/badge/").status_code == 404
    assert api.post(f"/api/v1/jobs/{theirs.pk}/badge/").status_code == 404
    for body in ({"job": str(theirs.pk)}, {"project": str(other_tenant.project.pk)}):
        response = api.post("/api/v1/badges/", body)
        assert response.status_code == 400 and error_of(response)["code"] == "does_not_exist"
    mine = api.post("/api/v1/badges/", {"job": str(make_job(tenant).pk)}).json()
    assert other_api.get("/api/v1/badges/").json()["results"] == []
    assert other_api.delete(f"/api/v1/badges/{mine['id']}/").status_code == 404


def test_viewer_reads_but_cannot_create(make_key, make_job, tenant):
    job = make_job(tenant)
    _, viewer = make_key(tenant, scopes=("read",))
    assert viewer.post(f"/api/v1/jobs/{job.pk}/badge/").status_code == 403
    assert viewer.get(f"/api/v1/jobs/{job.pk}/badge/").status_code == 404  # none yet, and reading is allowed


def test_job_page_shows_the_markdown(api, make_job, tenant, client):
    job = make_job(tenant)
    client.force_login(tenant.owner)
    assert b"/badge/" in client.get(f"/jobs/{job.pk}/").content  # the hint names the API
    url = api.post(f"/api/v1/jobs/{job.pk}/badge/").json()["url"]
    assert f"![cron status]({url})".encode() in client.get(f"/jobs/{job.pk}/").content
