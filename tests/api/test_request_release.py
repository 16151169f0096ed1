"""A finished API request leaves nothing for Python's cyclic garbage collector: its view,
Request and Response (and the page of rows they hold) are freed by reference counting when
the response is closed (apps.api.base.ApiViewMixin._release_request_objects; issue 38), and
the answer is the same as without the release.

The requests go through the test client's WSGI handler only (as a server calls the
application): the test client's own additions to a response (``response.json`` and the
like) form reference cycles of their own."""

import gc
import json
from itertools import count

import pytest
from django.test import RequestFactory
from django.test.client import ClientHandler
from rest_framework.request import Request
from rest_framework.response import Response

from apps.api.base import ApiViewMixin

pytestmark = pytest.mark.django_db

_names = count()


def _requests(tenant, make_job):
    """kind -> a function that sends one such request and returns the closed response."""
    handler = ClientHandler(enforce_csrf_checks=False)
    headers = {"HTTP_AUTHORIZATION": f"Bearer {tenant.full_api_key}", "content_type": "application/json"}
    job = make_job(tenant)

    def send(method, path, body=None):
        request = RequestFactory().generic(method, path, json.dumps(body) if body is not None else "", **headers)
        return lambda: handler(request.environ.copy() | {"wsgi.input": _payload(body)})

    def create():
        return send("POST", "/api/v1/jobs/", {
            "project": str(tenant.project.pk), "name": f"released {next(_names)}",
            "schedule": {"type": "cron", "expression": "*/5 * * * *"},
            "request": {"url": "https://example.com/hook", "method": "POST"}})()

    return {
        "read": send("GET", f"/api/v1/jobs/{job.pk}/"),
        "list": send("GET", "/api/v1/jobs/?page_size=50"),
        "history": send("GET", "/api/v1/executions/?page_size=50"),
        "job history": send("GET", f"/api/v1/jobs/{job.pk}/executions/?page_size=50"),
        "create": create,
        "trigger": send("POST", f"/api/v1/jobs/{job.pk}/trigger/", {}),
    }


def _payload(body):
    from django.test.client import FakePayload

    return FakePayload(json.dumps(body).encode() if body is not None else b"")


def left_to_the_collector(call):
    """The API views, DRF Requests and Responses that only Python's cyclic garbage collector
    freed after ``call`` (after a first call: caches), and ``call``'s answer."""
    call()  # the key's cache, the representation plans
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds stays in gc.garbage
    try:
        response = call()
        assert response.status_code in (200, 201, 202), response.content[:300]
        answer = (response.status_code, response.content, sorted(response.headers))
        del response
        call()  # a thread's representation plan keeps the last request's context until the next
        gc.collect()
        return sorted({type(thing).__name__ for thing in gc.garbage
                       if issubclass(type(thing), (ApiViewMixin, Request, Response))}), answer
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.mark.parametrize("kind", ["read", "list", "history", "job history", "trigger"])
def test_a_request_s_view_is_freed_when_its_response_closes(tenant, make_job, kind):
    left, _ = left_to_the_collector(_requests(tenant, make_job)[kind])
    assert left == []


def test_a_create_leaves_only_its_validating_serializer_s_cycle(tenant, make_job):
    """A create's serializer (its fields bound to it: a cycle of DRF's) holds its context,
    the request and the (emptied) view, until the collector: the Response is freed."""
    left, _ = left_to_the_collector(_requests(tenant, make_job)["create"])
    assert "Response" not in left


def test_without_the_release_the_view_waits_for_the_collector(tenant, make_job, monkeypatch):
    """The check above can fail: DRF's own objects form the cycle the release breaks."""
    monkeypatch.setattr(ApiViewMixin, "_release_request_objects", lambda self: None)
    left, _ = left_to_the_collector(_requests(tenant, make_job)["read"])
    assert left == ["JobViewSet", "Request", "Response"]


def test_the_answer_is_the_same_with_and_without_the_release(tenant, make_job, monkeypatch):
    requests = _requests(tenant, make_job)
    kinds = ("read", "list", "history", "job history")
    released = {kind: left_to_the_collector(requests[kind])[1] for kind in kinds}
    monkeypatch.setattr(ApiViewMixin, "_release_request_objects", lambda self: None)
    assert {kind: left_to_the_collector(requests[kind])[1] for kind in kinds} == released
