"""One error format everywhere, including errors raised outside DRF."""

import pytest
from django.test import override_settings

from tests.api.conftest import error_of, job_body


def test_unknown_api_path_answers_json_404(api):
    response = api.get("/api/v1/no-such-thing/")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "message": "Not found.", "fields": {}}}


def test_unknown_id_and_malformed_id_are_404(api):
    for path in ("/api/v1/jobs/01a22895-778b-7c8a-b09c-95d87563a95a/", "/api/v1/jobs/42/"):
        response = api.get(path)
        assert response.status_code == 404
        assert error_of(response)["code"] == "not_found"


def test_method_not_allowed(api):
    response = api.delete("/api/v1/jobs/")
    assert response.status_code == 405
    assert error_of(response)["code"] == "method_not_allowed"


def test_malformed_json_is_parse_error(api):
    response = api.post("/api/v1/jobs/", "{bad", content_type="application/json")
    assert response.status_code == 400
    assert error_of(response)["code"] == "parse_error"


def test_other_media_types_are_refused(api):
    response = api.post("/api/v1/jobs/", "name=x", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert error_of(response)["code"] == "unsupported_media_type"


def test_an_accept_header_the_api_cannot_answer_is_406(api):
    response = api.get("/api/v1/jobs/", HTTP_ACCEPT="text/csv")
    assert response.status_code == 406
    assert error_of(response)["code"] == "not_acceptable"


def test_a_body_that_is_not_an_object_is_400(api):
    response = api.post("/api/v1/jobs/", [1, 2], format="json")
    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid"


@pytest.mark.parametrize("extra, path", [
    ({"colour": "red"}, "colour"),
    ({"request": {"url": "https://example.com/", "verb": "GET"}}, "request.verb"),
    ({"retry": {"attempts": 3}}, "retry.attempts"),
    ({"success": {"codes": "200"}}, "success.codes"),
    ({"request": {"url": "https://example.com/", "auth": {"type": "bearer", "token": "t", "x": 1}}},
     "request.auth.x"),
])
def test_unknown_fields_are_rejected_with_their_path(api, tenant, extra, path):
    response = api.post("/api/v1/jobs/", job_body(tenant, **extra))
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "unknown_field"
    assert path in error["fields"]


def test_validation_errors_list_every_field(api, tenant):
    response = api.post("/api/v1/jobs/", {"project": str(tenant.project.pk)})
    error = error_of(response)
    assert error["code"] == "required"
    assert set(error["fields"]) == {"name", "schedule", "request"}


@pytest.mark.off_contract  # a provoked 500: no operation declares one
def test_django_level_500_under_api_is_json(tenant, api, monkeypatch, client):
    from apps.executions.history.job_api import JobViewSet

    def boom(*args, **kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr(JobViewSet, "list", boom)
    api.raise_request_exception = False
    response = api.get("/api/v1/jobs/")
    assert response.status_code == 500
    assert error_of(response)["code"] == "server_error"


@override_settings(DEBUG=False)
def test_non_api_404_stays_html(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert not response["Content-Type"].startswith("application/json")
