"""Success criteria and classification, including body regexes that must never hang."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronsvc.delivery.errors import InvalidRequest
from cronsvc.delivery.outcome import (
    DeliveryResult,
    SuccessCriteria,
    circuit_open,
    classify,
    storable_text,
    parse_status_codes,
    validate_criteria,
)
from cronsvc.delivery.saferegex import compile_pattern


def result(status=200, body="", error_kind=None, error_message=None):
    return DeliveryResult(status_code=status, headers={}, body_excerpt=body, body_truncated=False,
                          duration_ms=1.0, remote_addr="203.0.113.9", error_kind=error_kind,
                          error_message=error_message)


@pytest.mark.parametrize("status, kind", [
    (200, None), (201, None), (204, None), (299, None),
    (301, "http_3xx"), (304, "http_3xx"), (400, "http_4xx"), (404, "http_4xx"), (429, "http_4xx"),
    (500, "http_5xx"), (599, "http_5xx"), (101, "unexpected_status"),
])
def test_default_criteria_accept_any_2xx(status, kind):
    outcome = classify(result(status), SuccessCriteria())
    assert (outcome.succeeded, outcome.error_kind) == (kind is None, kind)
    assert outcome.message == f"HTTP {status}"


@pytest.mark.parametrize("kind", ["timeout", "connect_error", "dns_error", "tls_error", "forbidden_target"])
def test_transport_errors_pass_through(kind):
    outcome = classify(result(None, error_kind=kind, error_message="details"), SuccessCriteria())
    assert (outcome.succeeded, outcome.error_kind, outcome.message) == (False, kind, "details")


def test_a_transport_error_after_the_status_still_fails():
    outcome = classify(result(200, error_kind="timeout", error_message="slow"), SuccessCriteria())
    assert outcome.error_kind == "timeout"


def test_custom_status_codes_and_redirects():
    criteria = SuccessCriteria(status_codes=(200, range(202, 204)))
    assert classify(result(200), criteria).succeeded
    assert classify(result(203), criteria).succeeded
    assert classify(result(201), criteria).error_kind == "unexpected_status"
    assert classify(result(404), SuccessCriteria(status_codes={404})).succeeded
    assert classify(result(302), SuccessCriteria(accept_redirect_status=True)).succeeded


def test_parse_status_codes():
    assert parse_status_codes("200-299, 304") == (range(200, 300), range(304, 305))
    for bad in ("", "abc", "99", "200-700", "300-200"):
        with pytest.raises(InvalidRequest) as caught:
            parse_status_codes(bad)
        assert caught.value.code == "invalid_status_codes"


def test_body_contains():
    criteria = SuccessCriteria(body_contains='"ok": true')
    assert classify(result(200, '{"ok": true}'), criteria).succeeded
    outcome = classify(result(200, '{"ok": false}'), criteria)
    assert (outcome.succeeded, outcome.error_kind) == (False, "body_mismatch")
    # The status is judged first: a 500 is a 5xx, whatever its body says.
    assert classify(result(500, '{"ok": true}'), criteria).error_kind == "http_5xx"


def test_body_regex():
    criteria = SuccessCriteria(body_regex=r'"status"\s*:\s*"(ok|green)"')
    assert classify(result(200, '{"status" : "green"}'), criteria).succeeded
    assert classify(result(200, '{"status": "red"}'), criteria).error_kind == "body_mismatch"


def test_circuit_open_outcome():
    outcome = circuit_open("example.com:443", 1714564860.0)
    assert (outcome.succeeded, outcome.error_kind) == (False, "circuit_open")


# --- regexes that would hang a backtracking engine ------------------------------------------

@pytest.mark.parametrize("pattern, text", [
    (r"(a+)+$", "a" * 16000 + "b"),
    (r"(a|a)*c", "a" * 16000),
    (r"(a|aa)+$", "a" * 16000 + "!"),
    (r"(.*a){20}", "a" * 16000 + "b"),
    (r"^(\w+\s?)*$", "word " * 3000 + "!"),
    (r"(x+x+)+y", "x" * 16000),
    (r".*.*.*=.*", "a" * 16000),
])
def test_catastrophic_patterns_finish_quickly(pattern, text):
    started = time.perf_counter()
    outcome = classify(result(200, text), SuccessCriteria(body_regex=pattern))
    assert time.perf_counter() - started < 1.0
    assert outcome.error_kind in (None, "body_mismatch")


def test_catastrophic_patterns_give_the_right_answer():
    assert not compile_pattern(r"(a+)+$").search("a" * 40 + "b")
    assert compile_pattern(r"(a+)+$").search("b" + "a" * 40)
    assert compile_pattern(r"(.*a){20}").search("a" * 20)
    assert not compile_pattern(r"(.*a){20}").search("a" * 19)


@pytest.mark.parametrize("pattern", [r"(a)\1", r"(?=a)b", r"(?!a)b", r"(?<=a)b", r"(?<!a)b",
                                     r"(?P<x>a)(?P=x)", r"(a)?(?(1)b|c)", r"(?>a+)b", r"a++b"])
def test_features_that_need_backtracking_are_refused_when_saved(pattern):
    with pytest.raises(InvalidRequest) as caught:
        validate_criteria(SuccessCriteria(body_regex=pattern))
    assert caught.value.code == "unsupported_regex"


@pytest.mark.parametrize("pattern", ["(", "[a-", "a{2,1}", "*", "x" * 1001, "(?:a{100}){100}"])
def test_invalid_or_oversized_regexes_are_refused(pattern):
    with pytest.raises(InvalidRequest) as caught:
        validate_criteria(SuccessCriteria(body_regex=pattern))
    assert caught.value.code == "invalid_regex"


def test_other_criteria_validation():
    validate_criteria(SuccessCriteria(body_contains="ok", body_regex=r"\d+"))
    for criteria in (SuccessCriteria(status_codes=()), SuccessCriteria(status_codes=(700,)),
                     SuccessCriteria(body_contains="")):
        with pytest.raises(InvalidRequest):
            validate_criteria(criteria)


# --- same answers as re.search -------------------------------------------------------------------

SAMPLE_PATTERNS = [
    "", "a", "ab|cd", "a*b", "a+b?", "(ab)*c", "a{2,3}", "a{2}", "a{2,}", "a{,2}b", "[^a]b",
    "[a-c]+", "[^\\n]+", ".", "a.c", "(?s)a.c", "^a", "a$", "^$", "(?m)^b$", "(?m)a$", r"\Aa", r"a\Z",
    r"\bab\b", r"\Ba", r"a\B", r"\d+", r"\D", r"\s+", r"\S", r"\w+", r"\W", "(?i)ab", "(?i)[a-b]C",
    "(?i:A)b", "(a|b)*abb", "(a*)*b", "(a|ab)(c|bcd)", "a*?b", "a+?", "(?a)\\w", "x*",
    "[\\d_]", "[\\s\\S]", "(?x) a b # comment", "\\n", "(?:ab)+$", "\\$", "[$^]",
]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(SAMPLE_PATTERNS), st.text(alphabet="abcAB_1 \n\tü٣", max_size=12))
def test_matches_like_re_search(pattern, text):
    assert compile_pattern(pattern).search(text) == bool(re.search(pattern, text))


@pytest.mark.parametrize("text, kept", [
    ("plain", "plain"),
    ("a\x00b", "a\ufffdb"),                           # PostgreSQL refuses NUL in text and jsonb
    ("caf\udce9.txt", "caf\u00e9.txt"),               # an undecodable byte (surrogateescape): Latin-1
    ("d\u00e9j\u00e0 \udcff\x00", "d\u00e9j\u00e0 \u00ff\ufffd"),  # valid UTF-8 kept beside it
    ("lone \ud800 high", "lone \ufffd high"),         # a surrogate that stands for no byte
    ("\u65e5\u672c", "\u65e5\u672c"),
])
def test_storable_text_is_what_postgresql_and_json_writers_accept(text, kept):
    assert storable_text(text) == kept
    storable_text(text).encode("utf-8")  # no lone surrogate left
    assert "\x00" not in storable_text(text)


@given(st.text())
def test_storable_text_leaves_no_nul_or_lone_surrogate_and_keeps_clean_text(text):
    kept = storable_text(text)
    kept.encode("utf-8")
    assert "\x00" not in kept
    if "\x00" not in text and not any("\ud800" <= c <= "\udfff" for c in text):
        assert kept == text
