"""A job's own connect timeout and rate limit: in the API (bounds, stable codes, the schema),
in the job form, and used by the one request spec the worker sends from."""

import pytest
from django.utils import timezone

from apps.executions.worker import batch
from apps.executions.models import Execution
from apps.jobs import validation
from apps.jobs.models import Job
from tests.api.conftest import error_of, job_body


def created(api, tenant, **overrides):
    response = api.post("/api/v1/jobs/", job_body(tenant, **overrides), format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def test_connect_timeout_and_rate_limit_round_trip(api, tenant):
    body = created(api, tenant, request={"url": "https://example.com/hook", "connect_timeout_seconds": 2.5},
                   rate_limit_per_minute=30)
    assert body["request"]["connect_timeout_seconds"] == 2.5 and body["rate_limit_per_minute"] == 30
    job = Job.objects.get(pk=body["id"])
    assert (job.connect_timeout_seconds, job.rate_limit_per_minute) == (2.5, 30)
    answer = api.patch(f"/api/v1/jobs/{job.pk}/", {"rate_limit_per_minute": None,
                                                  "request": {"url": "https://example.com/hook",
                                                              "connect_timeout_seconds": None}}, format="json")
    assert answer.status_code == 200, answer.json()
    assert answer.json()["rate_limit_per_minute"] is None and answer.json()["request"]["connect_timeout_seconds"] is None


def test_defaults_are_the_platforms(api, tenant, settings):
    settings.DELIVERY_CONNECT_TIMEOUT = 7.0
    body = created(api, tenant)
    assert body["request"]["connect_timeout_seconds"] is None and body["rate_limit_per_minute"] is None
    job = Job.objects.get(pk=body["id"])
    assert validation.request_spec(job).connect_timeout == 7.0
    job.connect_timeout_seconds = 1.5
    assert validation.request_spec(job).connect_timeout == 1.5


@pytest.mark.parametrize("overrides, code, field", [
    ({"request": {"url": "https://example.com/", "connect_timeout_seconds": 0}}, "min_value",
     "request.connect_timeout_seconds"),
    ({"request": {"url": "https://example.com/", "connect_timeout_seconds": 61}}, "max_value",
     "request.connect_timeout_seconds"),
    ({"request": {"url": "https://example.com/", "connect_timeout_seconds": 5, "timeout_seconds": 3}},
     "invalid_timeout", "request.connect_timeout_seconds"),
    ({"rate_limit_per_minute": 0}, "min_value", "rate_limit_per_minute"),
    ({"rate_limit_per_minute": 10_001}, "max_value", "rate_limit_per_minute"),
])
def test_out_of_bounds_values_are_refused(api, tenant, overrides, code, field):
    response = api.post("/api/v1/jobs/", job_body(tenant, **overrides), format="json")
    assert response.status_code == 400
    error = error_of(response)
    assert field in error["fields"], error
    assert error["code"] == code, error


def test_the_schema_documents_both(api):
    schema = api.get("/api/v1/schema/?format=json").json()["components"]["schemas"]
    assert "connect_timeout_seconds" in schema["RequestSpec"]["properties"]
    rate = schema["Job"]["properties"]["rate_limit_per_minute"]
    assert rate["minimum"] == 1 and rate["maximum"] == 10_000 and rate.get("nullable")


@pytest.mark.usefixtures("allow_loopback")
def test_the_worker_sends_with_the_jobs_connect_timeout(tenant, make_job, target, monkeypatch):
    assert batch.request_spec is validation.request_spec  # one request spec
    specs = []
    prepare = batch.prepare
    monkeypatch.setattr(batch, "prepare", lambda spec, **kw: specs.append(spec) or prepare(spec, **kw))
    job = make_job(tenant, url=target.url("/ok"), connect_timeout_seconds=1.25)
    run = Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=timezone.now(), queue="q")
    batch.run_batch([run.id])
    run.refresh_from_db()
    assert run.status == "succeeded" and [spec.connect_timeout for spec in specs] == [1.25]
