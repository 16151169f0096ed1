"""Secrets never leave once saved: not in API responses, pages, stored request copies,
log lines, audit events or exports; yet the request still carries them."""

import gzip
import json
import logging

import pytest
from django.utils import timezone

from apps.accounts import gdpr
from apps.accounts.models import AuditEvent, DataExport
from apps.executions.worker.batch import run_batch
from apps.executions.models import Attempt, Execution
from apps.executions.shared_redis import redis_client
from apps.jobs.models import Job
from cronsvc.delivery.breaker import host_key
from tests.api.conftest import job_body
from tests.support.target import start_target

pytestmark = pytest.mark.django_db
TOKEN, API_KEY, COOKIE, MARKED = "sec-bearer-9f1", "sec-apikey-3c7", "sid=sec-cookie-5e2", "sec-marked-8a4"
SECRETS = (TOKEN, API_KEY, "sec-cookie-5e2", MARKED)


@pytest.fixture
def target(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    server = start_target()
    redis_client().delete("cronsvc:cb:" + host_key(server.base_url))
    yield server
    server.close()


def secret_job_body(tenant, url="https://example.com/hook"):
    return job_body(tenant, request={
        "url": url, "method": "POST", "body": "{}",
        "headers": {"X-Api-Key": API_KEY, "Cookie": COOKIE, "X-Signature-Token": MARKED, "X-Plain": "visible"},
        "secret_headers": ["X-Signature-Token"],
        "auth": {"type": "bearer", "token": TOKEN},
    })


def assert_no_secret(text, where):
    for secret in SECRETS:
        assert secret not in text, f"{secret} appears in {where}"


def test_secret_headers_are_stored_encrypted_and_masked(api, tenant):
    response = api.post("/api/v1/jobs/", secret_job_body(tenant), format="json")
    assert response.status_code == 201, response.json()
    request = response.json()["request"]
    assert request["headers"] == {"X-Plain": "visible", "X-Api-Key": "••••", "Cookie": "••••",
                                  "X-Signature-Token": "••••"}
    assert request["secret_headers"] == ["Cookie", "X-Api-Key", "X-Signature-Token"]
    assert request["auth"] == {"type": "bearer", "token": "••••"}
    job = Job.objects.get(pk=response.json()["id"])
    assert job.headers == {"X-Plain": "visible"}
    assert job.secret_headers == {"X-Api-Key": API_KEY, "Cookie": COOKIE, "X-Signature-Token": MARKED}


def test_sending_the_mask_back_keeps_the_stored_value(api, tenant):
    created = api.post("/api/v1/jobs/", secret_job_body(tenant), format="json").json()
    body = {"request": {**created["request"], "headers": {**created["request"]["headers"], "X-New": "n"}}}
    body["request"].pop("secret_headers")
    response = api.patch(f"/api/v1/jobs/{created['id']}/", body, format="json")
    assert response.status_code == 200, response.json()
    job = Job.objects.get(pk=created["id"])
    assert job.secret_headers["X-Signature-Token"] == MARKED and job.secret_headers["X-Api-Key"] == API_KEY
    assert job.headers == {"X-Plain": "visible", "X-New": "n"}
    # The mask for a header with nothing stored is refused, not saved.
    bad = {"request": {"url": "https://example.com/hook", "headers": {"X-Other": "••••"}}}
    response = api.patch(f"/api/v1/jobs/{created['id']}/", bad, format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_header"


def test_secrets_absent_from_every_response_log_audit_and_export(api, tenant, target, caplog):
    caplog.set_level(logging.DEBUG)
    created = api.post("/api/v1/jobs/", secret_job_body(tenant, url=target.url("/hook")), format="json")
    assert created.status_code == 201
    job_id = created.json()["id"]
    execution = Execution.objects.create(job_id=job_id, organization=tenant.organization,
                                         scheduled_for=timezone.now(), queue="q")
    run_batch([execution.id])

    # The request really carried every secret ...
    sent = target.requests_to("/hook")[-1].headers
    assert sent["authorization"] == f"Bearer {TOKEN}" and sent["x-api-key"] == API_KEY
    assert sent["cookie"] == COOKIE and sent["x-signature-token"] == MARKED
    # ... and the copy kept in history does not.
    attempt = Attempt.objects.get(execution=execution)
    assert_no_secret(json.dumps(attempt.request_headers), "the stored attempt")

    responses = [api.get(path) for path in (
        "/api/v1/jobs/", f"/api/v1/jobs/{job_id}/", f"/api/v1/jobs/{job_id}/executions/",
        "/api/v1/executions/", f"/api/v1/executions/{execution.pk}/", "/api/v1/audit-events/")]
    for response in responses:
        assert response.status_code == 200, response.request
        assert_no_secret(response.content.decode(), response.request["PATH_INFO"])
    assert_no_secret(json.dumps(list(AuditEvent.objects.values("data"))), "audit events")
    assert_no_secret("\n".join(r.getMessage() for r in caplog.records), "log lines")

    export = DataExport.objects.create(organization=tenant.organization)
    gdpr.run_export(export, now=timezone.now())
    assert_no_secret(gzip.decompress(export.archive).decode(), "the export")


def test_job_page_shows_the_mask_not_the_secret(api, tenant, client):
    created = api.post("/api/v1/jobs/", secret_job_body(tenant), format="json").json()
    client.force_login(tenant.owner)
    for path in (f"/jobs/{created['id']}/", f"/jobs/{created['id']}/edit/"):
        response = client.get(path)
        assert response.status_code == 200
        assert_no_secret(response.content.decode(), path)
