"""Abuse limits (413/414/431/400 with codes) and the security headers of our pages."""

import json

import pytest

from apps.api.middleware import csp_header
from cronsvc.jsondepth import exceeds_depth
from tests.api.conftest import job_body

pytestmark = pytest.mark.django_db


def code(response):
    return response.json()["error"]["code"]


def test_json_nesting_is_bounded(api, tenant, settings):
    settings.MAX_JSON_DEPTH = 32
    deep = "[" * 5000 + "]" * 5000  # the recursive parser would crash on this
    response = api.post("/api/v1/jobs/", deep, content_type="application/json")
    assert response.status_code == 400 and code(response) == "json_too_deep"
    body = job_body(tenant, description="x")
    body["tags"] = [[[["too"]]]]
    settings.MAX_JSON_DEPTH = 3
    response = api.post("/api/v1/jobs/", json.dumps(body), content_type="application/json")
    assert response.status_code == 400 and code(response) == "json_too_deep"


def test_depth_ignores_brackets_inside_strings():
    assert not exceeds_depth(json.dumps({"a": "[[[[[[[[{{{{{{"}), 2)
    assert exceeds_depth('{"a": {"b": {"c": 1}}}', 2)
    assert not exceeds_depth('{"a": {"b": "\\"[[[["}}', 2)


def test_a_large_body_is_refused_with_413(api, settings):
    settings.MAX_REQUEST_BODY_BYTES = 1000
    response = api.post("/api/v1/jobs/", json.dumps({"name": "x" * 2000}), content_type="application/json")
    assert response.status_code == 413 and code(response) == "request_too_large"


def test_a_long_url_is_refused_with_414(api, settings):
    settings.MAX_URL_LENGTH = 200
    response = api.get("/api/v1/jobs/?name=" + "a" * 300)
    assert response.status_code == 414 and code(response) == "url_too_long"


def test_large_headers_are_refused_with_431(api, settings):
    settings.MAX_REQUEST_HEADER_BYTES = 2000
    response = api.get("/api/v1/jobs/", HTTP_X_PADDING="p" * 3000)
    assert response.status_code == 431 and code(response) == "headers_too_large"


def test_pages_get_a_plain_413(client, settings):
    settings.MAX_REQUEST_BODY_BYTES = 100
    response = client.post("/login/", {"username": "u" * 500, "password": "p"})
    assert response.status_code == 413 and b"at most 100" in response.content


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("name", "n" * 201, "max_length"),
    ("tags", ["t"] * 51, "max_length"),
    ("tags", ["t" * 65], "max_length"),
])
def test_names_and_tags_are_bounded(api, tenant, field, value, expected):
    response = api.post("/api/v1/jobs/", job_body(tenant, **{field: value}), format="json")
    assert response.status_code == 400 and code(response) == expected


def test_crontab_size_is_bounded(api, tenant):
    crontab = "\n".join(f"* * * * * curl https://example.com/{n}" for n in range(1001))
    response = api.post("/api/v1/jobs/import-crontab/", {"crontab": crontab, "project": str(tenant.project.pk)},
                        format="json")
    assert response.status_code == 400 and code(response) == "crontab_too_large"


def test_header_and_body_of_a_job_are_bounded(api, tenant):
    response = api.post("/api/v1/jobs/", job_body(tenant, request={
        "url": "https://example.com/hook", "headers": {"X-Big": "v" * 9000}}), format="json")
    assert response.status_code == 400
    response = api.post("/api/v1/jobs/", job_body(tenant, request={
        "url": "https://example.com/" + "p" * 2100}), format="json")
    assert response.status_code == 400


def test_pages_carry_a_content_security_policy(client):
    response = client.get("/login/")
    policy = response["Content-Security-Policy"]
    assert "script-src 'self' 'nonce-" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy.split("script-src")[1].split(";")[0]
    assert response["X-Content-Type-Options"] == "nosniff"
    assert response["Referrer-Policy"] == "same-origin"
    assert response["X-Frame-Options"] == "DENY"


def test_inline_scripts_carry_the_nonce(client, tenant):
    client.force_login(tenant.owner)
    response = client.post("/jobs/new/", {"name": ""})  # the form with errors has its one inline script
    page = response.content.decode()
    policy = response["Content-Security-Policy"]
    nonce = policy.split("'nonce-")[1].split("'")[0]
    for chunk in page.split("<script")[1:]:
        tag = chunk.split(">")[0]
        assert "src=" in tag or f'nonce="{nonce}"' in tag, tag


def test_csp_names_no_wildcard():
    policy = csp_header("n")
    assert "*" not in policy and "unsafe-eval" not in policy


def test_session_cookie_flags(client, tenant, settings):
    tenant.owner.set_password("correct horse battery")
    tenant.owner.save()
    response = client.post("/login/", {"username": tenant.owner.email, "password": "correct horse battery"})
    cookie = response.cookies[settings.SESSION_COOKIE_NAME]
    assert cookie["httponly"] and cookie["samesite"] == "Lax"


def test_https_site_defaults_to_secure_cookies_and_hsts(monkeypatch):
    """The settings module read again with an https SITE_URL in server mode."""
    import importlib

    import config.settings as module

    monkeypatch.setenv("SITE_URL", "https://cron.example.com")
    monkeypatch.setenv("DATABASE_URL", "postgres://x@localhost/x")
    monkeypatch.setenv("SECRET_KEY", "k" * 40 + "-long-enough")
    monkeypatch.delenv("DEBUG", raising=False)
    try:
        fresh = importlib.reload(module)
        assert fresh.SESSION_COOKIE_SECURE and fresh.CSRF_COOKIE_SECURE
        assert fresh.SECURE_HSTS_SECONDS == 31536000
        monkeypatch.setenv("INSECURE_COOKIES", "true")
        assert not importlib.reload(module).SESSION_COOKIE_SECURE
        monkeypatch.delenv("INSECURE_COOKIES")
        monkeypatch.setenv("SITE_URL", "http://127.0.0.1:8000")
        fresh = importlib.reload(module)
        assert not fresh.SESSION_COOKIE_SECURE and fresh.SECURE_HSTS_SECONDS == 0
    finally:
        monkeypatch.undo()
        importlib.reload(module)


def test_a_catastrophic_regex_cannot_hang_a_worker():
    from cronsvc.delivery.saferegex import compile_pattern

    assert compile_pattern("(a+)+$").search("a" * 5000 + "b") is False
    assert compile_pattern("(a+)+$").search("a" * 5000) is True
