"""Structured logs and correlation ids: the request id is accepted or made, echoed and
logged; the worker's execution id reaches plain ``logging`` records as JSON fields."""

import io
import json
import logging
import logging.config

import pytest
import structlog

from apps.observability.logconfig import EXECUTION_ID, logging_config

pytestmark = pytest.mark.django_db


@pytest.fixture
def json_log():
    """The JSON configuration on a private logger, output captured."""
    config = logging_config("json", "INFO")
    formatter = logging.config.dictConfigClass(config).configure_custom(dict(config["formatters"]["structured"]))
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    logger = logging.getLogger("cronsvc.test-json")
    logger.addHandler(handler)
    logger.propagate = False
    yield logger, stream
    logger.removeHandler(handler)


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
    token = EXECUTION_ID.set("0192e2a4-0000-7000-8000-000000000001")
    tokens = structlog.contextvars.bind_contextvars(request_id="req-1")
    try:
        logger.warning("sending %s", "now")
    finally:
        structlog.contextvars.reset_contextvars(**tokens)
        EXECUTION_ID.reset(token)
    logger.info("after")
    first, second = lines(stream)
    assert first["message"] == "sending now"
    assert first["level"] == "warning"
    assert first["logger"] == "cronsvc.test-json"
    assert first["execution_id"] == "0192e2a4-0000-7000-8000-000000000001"
    assert first["request_id"] == "req-1"
    assert "execution_id" not in second and "request_id" not in second


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
