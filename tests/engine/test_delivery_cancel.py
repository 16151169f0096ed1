"""deliver(..., cancellation=): a cancel from another thread ends a delivery in flight at
once (its connection closed, seen by the server), and one asked before never sends."""

import ipaddress
import threading
from datetime import datetime, timezone

import pytest

from cronsvc.delivery.aio import deliver
from cronsvc.delivery.cancellation import Cancellation
from cronsvc.delivery.guard import AddressPolicy
from cronsvc.delivery.outcome import SuccessCriteria, classify
from cronsvc.delivery.request import RequestSpec, prepare
# The engine tests' sessions, closed on their loop's thread at the module's end.
from tests.engine.test_delivery_aio import _close_sessions_on_their_loop, make_session  # noqa: F401
from tests.support.processes import wait_for
from tests.support.target import start_target

LOOPBACK = AddressPolicy(allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),))


@pytest.fixture
def target():
    server = start_target()
    yield server
    server.close()


def _prepared(url, timeout):
    now = datetime.now(timezone.utc)
    return prepare(RequestSpec(url=url, timeout=timeout), variables={}, job_id="j", execution_id="e", attempt=1,
                   scheduled_for=now, signing_secrets=[], timestamp=int(now.timestamp()), version="test")


def _send_in_thread(prepared, cancellation):
    results = []
    thread = threading.Thread(target=lambda: results.append(deliver(
        prepared, session=make_session(LOOPBACK), policy=LOOPBACK, cancellation=cancellation)))
    thread.start()
    return thread, results


def test_a_cancel_closes_the_request_in_flight(target):
    cancellation = Cancellation()
    thread, results = _send_in_thread(_prepared(target.url("/hang?seconds=30"), timeout=60), cancellation)
    wait_for(lambda: target.requests_to("/hang"), timeout=10, message="the request to arrive")
    cancellation.cancel()
    wait_for(lambda: target.hung_up_on("/hang"), timeout=10, message="the server to see the connection closed")
    thread.join(10)
    (result,) = results
    assert (result.status_code, result.error_kind) == (None, "cancelled")
    assert not classify(result, SuccessCriteria()).succeeded


def test_a_cancel_before_sending_sends_nothing(target):
    cancellation = Cancellation()
    cancellation.cancel()
    thread, results = _send_in_thread(_prepared(target.url("/ok"), timeout=5), cancellation)
    thread.join(10)
    assert results[0].error_kind == "cancelled"
    assert target.requests_to("/ok") == []


def test_without_a_cancel_the_delivery_is_untouched(target):
    thread, results = _send_in_thread(_prepared(target.url("/ok"), timeout=5), Cancellation())
    thread.join(10)
    assert results[0].status_code == 200 and results[0].error_kind is None
