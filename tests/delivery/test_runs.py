"""The worker's logic on real PostgreSQL, Redis and a real local HTTP endpoint.

These call run_batch() in the test process; test_worker_process.py runs the same through
a real Celery worker.
"""

import base64
import hashlib
import hmac
import json
from datetime import timedelta

import pytest
from django.utils import timezone
from standardwebhooks import Webhook

from apps.executions.worker.batch import run_batch
from apps.executions.models import Execution
from apps.jobs.models import Job

pytestmark = pytest.mark.usefixtures("allow_loopback")


def queued(tenant, job, **fields):
    values = dict(job=job, organization=tenant.organization, scheduled_for=timezone.now(), queue="q")
    values.update(fields)
    return Execution.objects.create(**values)


def run(execution):
    run_batch([execution.id])
    execution.refresh_from_db()
    return execution


def test_success_is_recorded_with_the_response(tenant, make_job, target):
    job = make_job(tenant, url=target.url("/hello?x=1"), method="POST", body='{"name": "{{ job.name }}"}',
                   body_format="json")
    execution = run(queued(tenant, job))
    assert execution.status == "succeeded" and execution.attempt == 1
    assert execution.response_status == 200 and '"ok": true' in execution.response_body
    assert execution.remote_addr == "127.0.0.1"
    (attempt,) = execution.attempts.all()
    assert attempt.outcome == "succeeded" and attempt.request_method == "POST"
    (received,) = target.requests_to("/hello")
    assert json.loads(received.body) == {"name": job.name}
    assert received.headers["x-cronsvc-execution-id"] == str(execution.id)
    assert received.headers["x-cronsvc-attempt"] == "1"
    assert received.headers["user-agent"].startswith("cronsvc/")
    job.refresh_from_db()
    assert job.last_status == "succeeded" and job.consecutive_failures == 0


def test_credential_response_headers_are_masked_in_the_database_and_exports(tenant, make_job, target):
    import gzip

    from apps.accounts.gdpr import compressed_export

    execution = run(queued(tenant, make_job(tenant, url=target.url("/set-cookie"))))
    (attempt,) = execution.attempts.all()
    for headers in (execution.response_headers, attempt.response_headers):
        assert headers["set-cookie"] == "••••" and headers["x-request-id"] == "r-1"
    assert "s3cr3t-cookie" not in gzip.decompress(compressed_export(tenant.organization)).decode()


def test_an_answer_with_bytes_postgresql_cannot_store_as_text_is_recorded_not_poisonous(tenant, make_job, target):
    """A NUL in the body or a header byte that is not UTF-8 (a legacy endpoint's Latin-1
    file name) is no poison: PostgreSQL's text and jsonb refuse both as they arrive (NUL;
    the lone surrogate that stands for an undecodable byte), which failed the recording,
    left the run ``running`` and had it sent again after every lease."""
    execution = run(queued(tenant, make_job(tenant, url=target.url("/odd-bytes"))))
    assert execution.status == "succeeded" and execution.attempt == 1
    assert execution.response_body == "bin\ufffdary\ufffd end"
    (attempt,) = execution.attempts.all()
    for headers in (execution.response_headers, attempt.response_headers):
        assert headers["content-disposition"] == "attachment; filename=caf\u00e9.txt" and headers["x-ok"] == "plain"
    assert attempt.response_body == execution.response_body
    assert len(target.requests_to("/odd-bytes")) == 1


def test_signature_verifies_with_the_standard_webhooks_library(tenant, make_job, target):
    job = make_job(tenant, url=target.url("/signed"), method="POST", body='{"payload": 1}')
    execution = run(queued(tenant, job))
    (received,) = target.requests_to("/signed")
    secret = tenant.project.signing_secrets[0]
    Webhook(secret).verify(received.body, received.headers)  # raises when it does not verify
    assert received.headers["webhook-id"] == str(execution.id)
    # and by hand, with the standard library only
    signed = f"{received.headers['webhook-id']}.{received.headers['webhook-timestamp']}.".encode() + received.body
    key = base64.b64decode(secret.removeprefix("whsec_"))
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    assert f"v1,{expected}" in received.headers["webhook-signature"].split()


def test_two_secrets_during_rotation_both_sign(tenant, make_job, target):
    from cronsvc.delivery.signing import generate_secret

    project = tenant.project
    old = project.signing_secrets[0]
    project.signing_secrets = [generate_secret(), old]
    project.save()
    job = make_job(tenant, url=target.url("/rotating"), method="POST", body='{"x": 1}')
    run(queued(tenant, job))
    (received,) = target.requests_to("/rotating")
    assert len(received.headers["webhook-signature"].split()) == 2
    Webhook(old).verify(received.body, received.headers)
    Webhook(project.signing_secrets[0]).verify(received.body, received.headers)


def test_a_4xx_fails_at_once_without_retry(tenant, make_job, target):
    job = make_job(tenant, url=target.url("/status/404"), max_attempts=5)
    execution = run(queued(tenant, job))
    assert (execution.status, execution.error_kind, execution.next_attempt_at) == ("failed", "http_4xx", None)
    job.refresh_from_db()
    assert job.consecutive_failures == 1 and job.last_status == "failed"


def test_a_5xx_is_retried_with_backoff_and_then_dead(tenant, make_job, target):
    job = make_job(tenant, url=target.url("/status/503"), max_attempts=3, retry_initial_delay_seconds=10,
                   retry_max_delay_seconds=60)
    execution = queued(tenant, job)
    before = timezone.now()
    execution = run(execution)
    assert execution.status == "queued" and execution.attempt == 1 and execution.error_kind == "http_5xx"
    assert before <= execution.next_attempt_at <= timezone.now() + timedelta(seconds=10)
    assert execution.published_at is None  # the scheduler publishes it when it comes due

    # Not due yet: a message arriving early does nothing.
    Execution.objects.filter(id=execution.id).update(next_attempt_at=timezone.now() + timedelta(minutes=5))
    assert run(execution).attempt == 1

    for expected_status in ("queued", "dead"):
        Execution.objects.filter(id=execution.id).update(next_attempt_at=timezone.now())
        execution = run(execution)
        assert execution.status == expected_status
    assert execution.attempt == 3 and execution.attempts.count() == 3
    assert len(target.requests_to("/status/503")) == 3
    assert {r.headers["webhook-id"] for r in target.requests_to("/status/503")} == {str(execution.id)}
    assert [r.headers["x-cronsvc-attempt"] for r in target.requests_to("/status/503")] == ["1", "2", "3"]


def test_retry_after_sets_the_delay(tenant, make_job, target):
    job = make_job(tenant, url=target.url("/retry-after?seconds=40"), retry_initial_delay_seconds=1,
                   retry_max_delay_seconds=600)
    before = timezone.now()
    execution = run(queued(tenant, job))
    assert execution.status == "queued"
    delay = (execution.next_attempt_at - before).total_seconds()
    assert 39 <= delay <= 42


def test_retry_after_is_capped_by_the_max_delay(tenant, make_job, target):
    job = make_job(tenant, url=target.url("/retry-after?seconds=4000"), retry_max_delay_seconds=120)
    before = timezone.now()
    execution = run(queued(tenant, job))
    assert (execution.next_attempt_at - before).total_seconds() <= 122


def test_timeout_is_not_retried_unless_the_job_allows_it(tenant, make_job, target):
    job = make_job(tenant, url=target.url("/slow?seconds=3"), timeout_seconds=1, max_attempts=3)
    execution = run(queued(tenant, job))
    assert (execution.status, execution.error_kind) == ("timed_out", "timeout")
    job.retry_on_timeout = True
    job.save()
    execution = run(queued(tenant, job))
    assert (execution.status, execution.error_kind) == ("queued", "timeout")


def test_connection_refused_and_dns_failure_are_retried(tenant, make_job):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    refused = run(queued(tenant, make_job(tenant, url=f"http://127.0.0.1:{closed_port}/")))
    unknown = run(queued(tenant, make_job(tenant, url="http://no-such-host.invalid/")))
    assert (refused.status, refused.error_kind) == ("queued", "connect_error")
    assert (unknown.status, unknown.error_kind) == ("queued", "dns_error")


def test_private_addresses_are_refused_by_default(settings, tenant, make_job, target):
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    execution = run(queued(tenant, make_job(tenant, url=target.url("/private"))))
    assert (execution.status, execution.error_kind) == ("failed", "forbidden_target")
    assert target.requests_to("/private") == []


def test_body_check_turns_a_200_into_a_failure(tenant, make_job, target):
    job = make_job(tenant, url=target.url("/check"), success_body_contains='"ok": false')
    execution = run(queued(tenant, job))
    assert execution.error_kind == "body_mismatch" and execution.status == "queued"


def test_secrets_are_masked_in_the_recorded_request(tenant, make_job, target):
    job = make_job(tenant, url=target.url("/auth"), auth={"type": "bearer", "token": "tok-123"})
    execution = run(queued(tenant, job))
    (received,) = target.requests_to("/auth")
    assert received.headers["authorization"] == "Bearer tok-123"
    attempt = execution.attempts.get()
    assert "tok-123" not in json.dumps(attempt.request_headers)


def test_large_bodies_are_truncated_not_failed(settings, tenant, make_job, target):
    settings.RESPONSE_BODY_MAX_BYTES = 1024
    execution = run(queued(tenant, make_job(tenant, url=target.url("/big?bytes=100000"))))
    assert execution.status == "succeeded" and len(execution.response_body) <= 1024


def test_a_duplicate_message_runs_once(tenant, make_job, target):
    execution = queued(tenant, make_job(tenant, url=target.url("/once")))
    run_batch([execution.id])
    run_batch([execution.id, execution.id])
    assert len(target.requests_to("/once")) == 1


def test_auto_disable_after_consecutive_failures(tenant, make_job, target):
    plan = tenant.organization.plan
    plan.auto_disable_after_failures = 3
    plan.save()
    job = make_job(tenant, url=target.url("/status/400"))
    for _ in range(3):
        run(queued(tenant, job, scheduled_for=timezone.now()))
    job.refresh_from_db()
    assert not job.enabled and "3 consecutive" in job.disabled_reason


def test_concurrency_cap_defers_the_excess(tenant, make_job, target):
    plan = tenant.organization.plan
    plan.max_concurrency = 2
    plan.save()
    job = make_job(tenant, url=target.url("/slow?seconds=0.5"))
    executions = [queued(tenant, job, scheduled_for=timezone.now() - timedelta(seconds=i)) for i in range(5)]
    run_batch([e.id for e in executions])
    statuses = sorted(Execution.objects.filter(job=job).values_list("status", flat=True))
    assert statuses == ["queued"] * 3 + ["succeeded"] * 2  # waiting, not dropped
    assert all(e.next_attempt_at for e in Execution.objects.filter(job=job, status="queued"))


def test_overlap_forbid_is_enforced_by_the_worker_too(tenant, make_job, target):
    job = make_job(tenant, url=target.url("/slow?seconds=0.5"), overlap_policy=Job.OverlapPolicy.FORBID)
    first = queued(tenant, job)
    second = queued(tenant, job, scheduled_for=first.scheduled_for - timedelta(seconds=1))
    run_batch([first.id, second.id])
    statuses = sorted(Execution.objects.filter(job=job).values_list("status", "skip_reason"))
    assert statuses == [("skipped", "overlap"), ("succeeded", "")]


def test_circuit_opens_after_repeated_connect_failures_and_defers_runs(settings, tenant, make_job):
    import socket

    settings.BREAKER_FAILURE_THRESHOLD = 2
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    from apps.executions.worker.outbound import guards

    guards.cache_clear()
    try:
        job = make_job(tenant, url=url)
        results = [run(queued(tenant, job, scheduled_for=timezone.now())) for _ in range(3)]
        assert [r.error_kind for r in results] == ["connect_error", "connect_error", "circuit_open"]
        assert results[2].attempt == 0  # an open circuit spends none of the customer's attempts
        assert results[2].status == "queued" and results[2].next_attempt_at > timezone.now()
    finally:
        guards.cache_clear()


def test_job_rate_limit_spaces_requests_out(tenant, make_job, target):
    job = make_job(tenant, url=target.url("/limited"), rate_limit_per_minute=6)
    executions = [queued(tenant, job, scheduled_for=timezone.now() - timedelta(seconds=i)) for i in range(3)]
    run_batch([e.id for e in executions])
    assert len(target.requests_to("/limited")) == 1
    waiting = Execution.objects.filter(job=job, status="queued")
    assert waiting.count() == 2
    assert all(e.next_attempt_at >= timezone.now() + timedelta(seconds=5) for e in waiting)
