"""Structured logs and correlation ids: the request id is accepted or made, echoed and
logged; the worker's execution id reaches plain ``logging`` records as JSON fields."""

import contextlib
import io
import json
import logging
import logging.config

import pytest
import structlog

from apps.executions.worker.logcontext import RUN
from apps.observability.logconfig import logging_config

pytestmark = pytest.mark.django_db


@pytest.fixture
def json_log():
    """The JSON configuration on a private logger, output captured."""
    with captured_json("cronsvc.test-json") as captured:
        yield captured


@contextlib.contextmanager
def captured_json(name, level=logging.INFO):
    """(the logger ``name``, the stream its JSON lines go to) while inside."""
    config = logging_config("json", "INFO")
    formatter = logging.config.dictConfigClass(config).configure_custom(dict(config["formatters"]["structured"]))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    logger = logging.getLogger(name)
    saved = logger.propagate, logger.level
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(level)
    try:
        yield logger, stream
    finally:
        logger.removeHandler(handler)
        logger.propagate, logger.level = saved


def lines(stream):
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_a_request_id_is_made_and_echoed(client):
    response = client.get("/healthz")
    assert len(response["X-Request-Id"]) == 32


def test_a_callers_request_id_is_kept(client):
    assert client.get("/healthz", HTTP_X_REQUEST_ID="edge-1234.abc")["X-Request-Id"] == "edge-1234.abc"


def test_an_unsafe_request_id_is_replaced(client):
    echoed = client.get("/healthz", HTTP_X_REQUEST_ID="bad id\r\nSet-Cookie: x")["X-Request-Id"]
    assert "Set-Cookie" not in echoed and len(echoed) == 32


def test_json_lines_carry_the_bound_ids(json_log):
    logger, stream = json_log
    token = RUN.set(("0192e2a4-0000-7000-8000-000000000001", "0192e2a4-0000-7000-8000-0000000000aa"))
    tokens = structlog.contextvars.bind_contextvars(request_id="req-1")
    try:
        logger.warning("sending %s", "now")
    finally:
        structlog.contextvars.reset_contextvars(**tokens)
        RUN.reset(token)
    logger.info("after")
    first, second = lines(stream)
    assert first["message"] == "sending now"
    assert first["level"] == "warning"
    assert first["logger"] == "cronsvc.test-json"
    assert first["execution_id"] == "0192e2a4-0000-7000-8000-000000000001"
    assert first["job_id"] == "0192e2a4-0000-7000-8000-0000000000aa"
    assert first["request_id"] == "req-1"
    assert not {"execution_id", "job_id", "request_id"} & set(second)


def test_json_lines_carry_the_traceback(json_log):
    logger, stream = json_log
    try:
        raise ValueError("boom")
    except ValueError:
        logger.exception("failed")
    (line,) = lines(stream)
    assert "ValueError: boom" in line["exception"]


def test_an_unknown_log_format_is_refused():
    with pytest.raises(ValueError, match="LOG_FORMAT"):
        logging_config("xml", "INFO")


# --- the worker's lines about a run, and the web's access log


def test_a_workers_lines_about_a_run_carry_its_execution_and_job(tenant, make_job, target, allow_loopback):
    """A run delivered by the worker's own path (run_batch), and one whose lease was taken back
    before its attempt was recorded: every line about them names the execution and the job."""
    from django.db.models import F

    from apps.executions.worker.batch import run_batch
    from apps.executions.models import Execution
    from django.utils import timezone

    from tests.delivery.test_grouping import queued, result
    from apps.executions.worker import recording

    job = make_job(tenant, url=target.url("/ok"))
    delivered = queued(tenant, job)
    with captured_json("", logging.DEBUG) as (_, stream):
        assert run_batch([delivered.id]) == 1
        lost = queued(tenant, job, status="running", started_at=timezone.now(), lease_token=5)
        # taken back and claimed again by another worker: a new token
        Execution.objects.filter(id=lost.id).update(lease_token=F("lease_token") + 1)
        recording.record_attempts([result(lost, "failed")])
    about = {}
    for line in lines(stream):
        if "execution_id" in line:
            about.setdefault(line["execution_id"], []).append(line)
            assert line["job_id"] == str(job.pk), line
    assert any(line["message"].startswith("sent: 200") for line in about[str(delivered.id)])
    assert any("superseded" in line["message"] for line in about[str(lost.id)])


def test_the_access_log_is_json_with_the_request_id(client, db):
    with captured_json("cronsvc.access") as (_, stream):
        response = client.get("/healthz?secret=1", HTTP_X_REQUEST_ID="edge-42")
    (line,) = lines(stream)
    assert response["X-Request-Id"] == "edge-42"
    assert line["logger"] == "cronsvc.access" and line["level"] == "info" and line["message"] == "request"
    assert (line["request_id"], line["method"], line["path"], line["status"]) == ("edge-42", "GET", "/healthz", 200)
    assert line["duration_ms"] >= 0 and "secret" not in json.dumps(line)


def test_a_ping_on_the_fast_lane_is_in_the_access_log(db):
    from django.test import RequestFactory

    from config.wsgi import application

    environ = RequestFactory().get("/ping/no-such-monitor", HTTP_X_REQUEST_ID="ping-7").environ
    with captured_json("cronsvc.access") as (_, stream):
        status = []
        application(environ, lambda s, headers: status.append(s))
    (line,) = lines(stream)
    assert (line["request_id"], line["path"], line["status"]) == ("ping-7", "/ping/no-such-monitor", int(status[0][:3]))
