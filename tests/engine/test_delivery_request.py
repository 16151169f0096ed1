"""Request specs: header rules, body templates, and the headers of each attempt."""

from __future__ import annotations

import base64
import datetime as dt
import json
from urllib.parse import parse_qs

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronsvc.delivery import signing
from cronsvc.delivery.request import (
    InvalidRequest,
    RequestSpec,
    build_headers,
    prepare,
    render_body,
    standard_variables,
    validate_headers,
    validate_spec,
)
from cronsvc.delivery.template import template_variables

SCHEDULED = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
NOW = dt.datetime(2024, 5, 1, 12, 0, 3, tzinfo=dt.timezone.utc)


def variables(name="nightly", attempt=1):
    return standard_variables(job_id=42, job_name=name, execution_id="ex-9",
                              scheduled_for=SCHEDULED, attempt=attempt, now=NOW)


def refused(code, call, *args, **kwargs):
    with pytest.raises(InvalidRequest) as caught:
        call(*args, **kwargs)
    assert caught.value.code == code, caught.value
    return caught.value


# --- headers -------------------------------------------------------------------------------

@pytest.mark.parametrize("headers", [
    {"X-Evil": "a\r\nInjected: yes"},
    {"X-Evil": "a\nb"},
    {"X-Evil": "a\rb"},
    {"X-Evil": "nul\x00"},
    {"X-Evil\r\nInjected": "x"},
    {"X Evil": "space in name"},
    {"X-Evil:": "colon in name"},
    {"": "empty name"},
    {"X-Evil": " leading space"},
    {"X-Evil": "non-ascii é"},
    {"X-Evil": 5},
])
def test_malformed_headers_are_refused(headers):
    refused("invalid_header", validate_headers, headers)


@pytest.mark.parametrize("name", [
    "webhook-id", "Webhook-Timestamp", "WEBHOOK-SIGNATURE", "X-Cronsvc-Job-Id", "x-cronsvc-anything",
    "Host", "content-length", "Transfer-Encoding", "Connection", "Keep-Alive", "Upgrade", "TE",
    "Expect", "Proxy-Authorization",
])
def test_reserved_headers_are_refused(name):
    error = refused("reserved_header", validate_headers, {name: "x"})
    assert error.field == f"headers.{name}"


def test_ordinary_headers_including_user_agent_are_accepted():
    validate_headers({"User-Agent": "my-agent/1", "Accept": "application/json",
                      "X-Api-Key": "k3y!#$%", "Content-Type": "application/vnd.api+json", "X-Empty": ""})


def test_a_header_given_twice_in_different_case_is_refused():
    refused("duplicate_header", validate_headers, {"X-Key": "a", "x-key": "b"})


# --- body templates --------------------------------------------------------------------------

def test_json_escaping_inside_a_string_literal():
    name = 'my "quoted" job \\ with\nnewline and \u2028 and </script>'
    body = render_body('{"name": "{{ job.name }}", "note": "job {{job.name}}!"}',
                       variables(name), "json")
    assert json.loads(body) == {"name": name, "note": f"job {name}!"}


def test_json_values_outside_strings_keep_their_type():
    body = render_body('{"attempt": {{ attempt }}, "name": {{ job.name }}, "id": {{ job.id }}}',
                       variables('a "b"', attempt=3), "json")
    assert json.loads(body) == {"attempt": 3, "name": 'a "b"', "id": "42"}


def test_an_escaped_quote_in_the_template_does_not_confuse_the_string_tracking():
    body = render_body('{"a": "x\\"{{ job.name }}", "b": {{ attempt }}}', variables('q"'), "json")
    assert json.loads(body) == {"a": 'x"q"', "b": 1}


@given(st.text())
def test_no_job_name_can_break_out_of_a_json_string(name):
    body = render_body('{"name": "{{ job.name }}", "raw": {{ job.name }}}', variables(name), "json")
    assert json.loads(body) == {"name": name, "raw": name}


@given(st.text())
def test_no_job_name_can_add_a_form_field(name):
    body = render_body("name={{ job.name }}&fixed=1", variables(name), "form")
    assert parse_qs(body, keep_blank_values=True) == {"name": [name], "fixed": ["1"]}


def test_raw_substitution_and_all_standard_variables():
    body = render_body("{{job.id}} {{ job.name }} {{ execution.id }} {{ scheduled_for }} "
                       "{{ attempt }} {{ now }}", variables(), "raw")
    assert body == "42 nightly ex-9 2024-05-01T12:00:00Z 1 2024-05-01T12:00:03Z"


def test_more_variables_are_more_keys():
    body = render_body("{{ upstream.fetch.status }}", {"upstream.fetch.status": 200}, "raw")
    assert body == "200"
    assert template_variables("a {{ upstream.fetch-data.body }} {{ now }}") == [
        "upstream.fetch-data.body", "now"]


def test_unknown_variables_are_refused_at_validation():
    spec = RequestSpec(url="https://example.com/", method="POST", body="{{ job.secret }}")
    error = refused("unknown_variable", validate_spec, spec)
    assert "job.secret" in error.message


@pytest.mark.parametrize("template", [
    "{{ job.name | upper }}", "{{ 1 + 1 }}", "{{ job.name() }}", "{{ job['name'] }}", "{{ }}",
    "ok {{ job.id }} then {{ job.name|upper }}",
])
def test_anything_but_a_dotted_name_in_braces_is_refused(template):
    spec = RequestSpec(url="https://example.com/", method="POST", body=template)
    refused("invalid_placeholder", validate_spec, spec)


def test_names_are_looked_up_never_evaluated():
    spec = RequestSpec(url="https://example.com/", method="POST", body="{{ job.__class__.__mro__ }}")
    refused("unknown_variable", validate_spec, spec)
    refused("unknown_variable", render_body, "{{ job.__class__ }}", variables(), "raw")


def test_a_json_template_must_render_to_json():
    spec = RequestSpec(url="https://example.com/", method="POST", body_format="json",
                       body='{"name": {{ job.name }}')
    refused("invalid_json", validate_spec, spec)
    validate_spec(RequestSpec(url="https://example.com/", method="POST", body_format="json",
                              body='{"name": {{ job.name }}, "n": "{{ attempt }}"}'))


# --- the spec ---------------------------------------------------------------------------------

@pytest.mark.parametrize("changes, code", [
    ({"method": "TRACE"}, "invalid_method"),
    ({"method": "get"}, "invalid_method"),
    ({"body": "x", "method": "GET"}, "body_not_allowed"),
    ({"body": "x", "method": "HEAD"}, "body_not_allowed"),
    ({"body": "x" * 70000, "method": "POST"}, "body_too_large"),
    ({"body_format": "xml"}, "invalid_body_format"),
    ({"auth": {"type": "digest"}}, "invalid_auth"),
    ({"auth": {"type": "bearer", "token": "a b"}}, "invalid_auth"),
    ({"auth": {"type": "bearer", "token": "a\r\nX: y"}}, "invalid_auth"),
    ({"auth": {"type": "bearer", "token": ""}}, "invalid_auth"),
    ({"auth": {"type": "basic", "username": "a:b", "password": "p"}}, "invalid_auth"),
    ({"auth": {"type": "basic", "username": "a", "password": "p\n"}}, "invalid_auth"),
    ({"auth": {"type": "bearer", "token": "t"}, "headers": {"authorization": "x"}}, "conflicting_header"),
    ({"timeout": 0}, "invalid_timeout"),
    ({"timeout": 301}, "invalid_timeout"),
    ({"connect_timeout": 40, "timeout": 30}, "invalid_timeout"),
    ({"max_redirects": 11}, "invalid_redirects"),
    ({"headers": {"Host": "internal"}}, "reserved_header"),
])
def test_invalid_specs(changes, code):
    refused(code, validate_spec, RequestSpec(url="https://example.com/", **changes))


def test_a_valid_spec():
    validate_spec(RequestSpec(
        url="https://example.com/hook", method="POST", headers={"X-Team": "ops"},
        body="job={{ job.id }}", body_format="form",
        auth={"type": "basic", "username": "user", "password": "pass with spaces é"},
        timeout=60, connect_timeout=5, follow_redirects=True, max_redirects=3,
    ))


# --- headers of an attempt -----------------------------------------------------------------------

def headers_for(spec, *, body=b"", attempt=1, secrets=(), timestamp=1714564800):
    return build_headers(spec, body=body, job_id=42, execution_id="ex-9", attempt=attempt,
                         scheduled_for=SCHEDULED, signing_secrets=list(secrets),
                         timestamp=timestamp, version="0.1.0")


def test_build_headers_adds_ours():
    headers = headers_for(RequestSpec(url="https://example.com/", headers={"X-Team": "ops"}))
    assert headers == {
        "User-Agent": "cronsvc/0.1.0",
        "X-Team": "ops",
        "X-Cronsvc-Job-Id": "42",
        "X-Cronsvc-Execution-Id": "ex-9",
        "X-Cronsvc-Attempt": "1",
        "X-Cronsvc-Scheduled-For": "2024-05-01T12:00:00Z",
        "webhook-id": "ex-9",
        "webhook-timestamp": "1714564800",
    }


def test_webhook_id_is_stable_across_retries_and_the_signature_covers_the_body():
    spec = RequestSpec(url="https://example.com/", method="POST", body="x")
    secret = signing.generate_secret()
    first = headers_for(spec, body=b"x", attempt=1, secrets=[secret], timestamp=100)
    second = headers_for(spec, body=b"x", attempt=2, secrets=[secret], timestamp=160)
    assert first["webhook-id"] == second["webhook-id"] == "ex-9"
    assert signing.verify(secret, first, b"x", now=100)
    assert signing.verify(secret, second, b"x", now=160)
    assert not signing.verify(secret, second, b"y", now=160)


@pytest.mark.parametrize("body_format, content_type", [
    ("json", "application/json"), ("form", "application/x-www-form-urlencoded"),
    ("raw", "text/plain; charset=utf-8"),
])
def test_content_type_follows_the_body_format(body_format, content_type):
    spec = RequestSpec(url="https://example.com/", method="POST", body="1", body_format=body_format)
    assert headers_for(spec, body=b"1")["Content-Type"] == content_type


def test_the_customer_may_choose_user_agent_and_content_type():
    spec = RequestSpec(url="https://example.com/", method="POST", body="{}", body_format="json",
                       headers={"content-type": "application/vnd.api+json", "User-Agent": "mine"})
    headers = headers_for(spec, body=b"{}")
    assert headers["content-type"] == "application/vnd.api+json" and "Content-Type" not in headers
    assert headers["User-Agent"] == "mine"


def test_basic_and_bearer_auth():
    basic = RequestSpec(url="https://example.com/", auth={"type": "basic", "username": "u", "password": "p é"})
    encoded = headers_for(basic)["Authorization"].removeprefix("Basic ")
    assert base64.b64decode(encoded).decode() == "u:p é"
    bearer = RequestSpec(url="https://example.com/", auth={"type": "bearer", "token": "t0k3n"})
    assert headers_for(bearer)["Authorization"] == "Bearer t0k3n"


def test_build_headers_refuses_a_stored_spec_with_reserved_headers():
    spec = RequestSpec(url="https://example.com/", headers={"webhook-signature": "v1,forged"})
    refused("reserved_header", headers_for, spec)


def test_prepare_renders_signs_and_copies_the_settings():
    secret = signing.generate_secret()
    spec = RequestSpec(url="https://example.com/x", method="PUT", body_format="json",
                       body='{"n": "{{ job.name }}"}', timeout=12, connect_timeout=2,
                       follow_redirects=True, max_redirects=4)
    request = prepare(spec, variables=variables('a"b'), job_id=42, execution_id="ex-9", attempt=2,
                      scheduled_for=SCHEDULED, signing_secrets=[secret], timestamp=1000,
                      version="0.1.0")
    assert request.body == '{"n": "a\\"b"}'.encode()
    assert (request.method, request.url, request.timeout, request.connect_timeout) == (
        "PUT", "https://example.com/x", 12, 2)
    assert request.follow_redirects and request.max_redirects == 4
    assert signing.verify(secret, request.headers, request.body, now=1000)


@pytest.mark.parametrize("headers", [
    {},
    {"User-Agent": "cronsvc/1", "webhook-id": "x"},
    {"accept": "application/json"},
    {"ACCEPT-ENCODING": "identity", "X-Other": "1"},
    {"Accept": "text/plain", "Accept-Encoding": "br"},
])
def test_default_headers_kept_per_name_set_give_what_the_per_delivery_merge_gave(headers):
    """``with_default_headers`` keeps the defaults to add per set of header names; the
    result, order included, is the per-delivery merge's (the slow path, written out here)."""
    from cronsvc.delivery.request import DEFAULT_HEADERS, with_default_headers

    given = {name.lower() for name in headers}
    slow = {name: value for name, value in DEFAULT_HEADERS.items() if name.lower() not in given}
    slow.update(headers)
    for _ in range(2):  # computed, then kept
        fast = with_default_headers(headers)
        assert list(fast.items()) == list(slow.items())
    fast["Accept"] = "changed"  # the caller's copy: the kept defaults are not touched
    assert list(with_default_headers(headers).items()) == list(slow.items())
