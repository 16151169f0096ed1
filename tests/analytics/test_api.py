"""GET /api/v1/jobs/{id}/stats/ and /api/v1/stats/: payload, window validation, tenancy,
and the job list's ?health= filter."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions.models import Execution
from tests.api.conftest import error_of, key_client

S = Execution.Status
pytestmark = pytest.mark.django_db


def test_job_stats(api, make_job, make_run, tenant):
    job = make_job(tenant)
    now = timezone.now()
    make_run(job, now - timedelta(hours=1), duration_ms=100, late_ms=20)
    make_run(job, now - timedelta(hours=2), duration_ms=300, late_ms=40, status=S.FAILED, error_kind="http_status")
    make_run(job, now - timedelta(days=3), duration_ms=900)  # outside 24h, inside 7d
    body = api.get(f"/api/v1/jobs/{job.pk}/stats/").json()  # the default window is 24h
    assert body["window"] == "24h"
    assert (body["runs"], body["succeeded"], body["failed"], body["success_rate"]) == (2, 1, 1, 50.0)
    assert body["failures_by_kind"] == {"http_status": 1}
    assert body["duration_ms"] == {"p50": 100, "p95": 300, "p99": 300}
    assert body["lateness_ms"] == {"p50": 20, "p95": 40, "p99": 40}
    assert body["percentiles"] == "exact"
    week = api.get(f"/api/v1/jobs/{job.pk}/stats/?window=7d").json()
    assert (week["window"], week["runs"]) == ("7d", 3)


def test_organization_stats(api, make_job, make_run, tenant, other_tenant):
    job = make_job(tenant)
    make_run(job, timezone.now() - timedelta(hours=1), duration_ms=100)
    make_run(make_job(other_tenant), timezone.now() - timedelta(hours=1), duration_ms=100)
    body = api.get("/api/v1/stats/?window=30d").json()
    assert (body["window"], body["runs"]) == ("30d", 1)
    assert api.get(f"/api/v1/stats/?project={tenant.project.pk}").json()["runs"] == 1


@pytest.mark.parametrize("window", ["1y", "", "24H", "7"])
def test_invalid_window(api, make_job, tenant, window):
    job = make_job(tenant)
    for url in (f"/api/v1/jobs/{job.pk}/stats/?window={window}", f"/api/v1/stats/?window={window}"):
        response = api.get(url)
        assert response.status_code == 400
        assert error_of(response)["code"] == "invalid_window"
        assert "window" in error_of(response)["fields"]


def test_other_tenants_job_and_project_are_not_found(api, other_api, make_job, tenant, other_tenant):
    job = make_job(other_tenant)
    response = api.get(f"/api/v1/jobs/{job.pk}/stats/")
    assert response.status_code == 404
    assert error_of(response)["code"] == "not_found"
    assert api.get(f"/api/v1/stats/?project={other_tenant.project.pk}").status_code == 404
    assert error_of(api.get("/api/v1/stats/?project=nope"))["code"] == "invalid"
    assert other_api.get(f"/api/v1/jobs/{job.pk}/stats/").status_code == 200


def limited_client(tenant, projects):
    from apps.accounts.apikeys import create_api_key

    key, full = create_api_key(tenant.organization, "limited", scopes=("read", "write"))
    key.limited_to_projects = True
    key.save()
    key.projects.set(projects)
    return key_client(full)


def test_project_limited_key_sees_its_projects_only(make_job, make_run, tenant):
    from apps.projects.models import Project

    hidden = Project.objects.create(organization=tenant.organization, name="Hidden", slug="hidden")
    make_run(make_job(tenant), timezone.now() - timedelta(hours=1))
    make_run(make_job(tenant, project=hidden), timezone.now() - timedelta(hours=1))
    client = limited_client(tenant, [tenant.project])
    assert client.get("/api/v1/stats/").json()["runs"] == 1
    assert client.get(f"/api/v1/stats/?project={hidden.pk}").status_code == 404


def test_stats_need_a_key(make_job, tenant):
    from rest_framework.test import APIClient

    assert APIClient().get("/api/v1/stats/").status_code in (401, 403)


def test_job_list_health_filter(api, make_job, tenant):
    healthy = make_job(tenant, name="healthy", last_run_at=timezone.now())
    new = make_job(tenant, name="new")  # never run: neither healthy nor failing yet
    failing = make_job(tenant, name="failing", consecutive_failures=2)
    paused = make_job(tenant, name="paused", enabled=False)
    names = lambda health: {j["name"] for j in api.get(f"/api/v1/jobs/?health={health}").json()["results"]}  # noqa: E731
    assert names("failing") == {failing.name}
    assert names("healthy") == {healthy.name}
    assert names("new") == {new.name}
    assert names("paused") == {paused.name}
    response = api.get("/api/v1/jobs/?health=sad")
    assert response.status_code == 400
