"""{{ upstream.<job>.status|outcome|body|json.<path> }} in body templates (engine only)."""

import json

import pytest

from cronsvc.delivery.errors import InvalidRequest
from cronsvc.delivery.template import (
    UPSTREAM_VALUE_MAX_CHARS, UpstreamResult, WorkflowVariables, check_template, render_body, upstream_key,
)

BODY = json.dumps({"user": {"name": 'Ann "the" <admin>', "ids": [7, 8]}, "n": 3, "ok": True})


def variables(body=BODY):
    return WorkflowVariables({"job.id": "j1"}, {"Extract": UpstreamResult("succeeded", 201, body)})


def test_json_body_escapes_strings_and_keeps_json_values():
    template = ('{"code": {{ upstream.Extract.status }}, "who": "{{ upstream.Extract.json.user.name }}", '
                '"ids": {{ upstream.Extract.json.user.ids }}, "first": {{ upstream.Extract.json.user.ids.0 }}, '
                '"missing": {{ upstream.Extract.json.nope.deeper }}, "raw": "{{ upstream.Extract.body }}", '
                '"outcome": "{{ upstream.Extract.outcome }}", "job": "{{ job.id }}"}')
    out = json.loads(render_body(template, variables(), "json"))
    assert out == {"code": 201, "who": 'Ann "the" <admin>', "ids": [7, 8], "first": 7, "missing": None,
                   "raw": BODY, "outcome": "succeeded", "job": "j1"}


def test_form_body_is_percent_encoded():
    out = render_body("who={{ upstream.Extract.json.user.name }}&code={{ upstream.Extract.status }}",
                      variables(), "form")
    assert out == "who=Ann+%22the%22+%3Cadmin%3E&code=201"


def test_an_upstream_that_did_not_run_reads_as_null_or_empty():
    assert render_body('{"x": {{ upstream.Other.body }}}', variables(), "json") == '{"x": null}'
    assert render_body("x={{ upstream.Other.status }}", variables(), "form") == "x="
    assert render_body("{{ upstream.Other.json.a }}", {}, "raw") == ""


def test_values_are_capped():
    big = "x" * (UPSTREAM_VALUE_MAX_CHARS * 2)
    out = render_body("{{ upstream.Extract.body }}", variables(big), "raw")
    assert len(out) == UPSTREAM_VALUE_MAX_CHARS
    doc = json.dumps({"list": ["y" * 100] * 400})
    capped = render_body('{"v": {{ upstream.Extract.json.list }}}', variables(doc), "json")
    assert len(json.loads(capped)["v"]) == UPSTREAM_VALUE_MAX_CHARS  # cut, as text


def test_non_json_upstream_body_reads_null_paths():
    assert render_body('{"v": {{ upstream.Extract.json.a }}}', variables("plain text"), "json") == '{"v": null}'


def test_templates_accept_upstream_names_and_refuse_other_fields():
    check_template('{"a": {{ upstream.Extract.json.a.b }}, "b": "{{ upstream.x-y.body }}"}', "json", set())
    with pytest.raises(InvalidRequest) as refused:
        check_template("{{ upstream.Extract.headers }}", "raw", set())
    assert refused.value.code == "unknown_variable"


def test_upstream_key_spells_names_as_placeholders():
    assert upstream_key("Nightly report (EU)") == "Nightly_report__EU_"
    assert upstream_key("load-v2_x") == "load-v2_x"
