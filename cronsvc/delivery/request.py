"""What a job sends: the request spec, its validation, the request prepared per attempt, and
the request each hop sends (default headers, the redirect rules)."""

from __future__ import annotations

import base64
import re
from collections.abc import Container, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any
from urllib.parse import urlsplit

from . import signing
from .errors import InvalidRequest
from .template import BODY_FORMATS, check_template, iso_utc, render_body

__all__ = [
    "InvalidRequest", "RequestSpec", "PreparedDelivery", "STANDARD_VARIABLES",
    "validate_spec", "validate_headers", "render_body", "standard_variables",
    "build_headers", "prepare", "REDIRECT_STATUSES", "with_default_headers", "redirected",
]

METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"})
METHODS_WITHOUT_BODY = frozenset({"GET", "HEAD"})
STANDARD_VARIABLES = frozenset(
    {"job.id", "job.name", "execution.id", "scheduled_for", "attempt", "now"}
)
CONTENT_TYPES = {
    "json": "application/json",
    "form": "application/x-www-form-urlencoded",
    "raw": "text/plain; charset=utf-8",
}

# Set by the platform (signatures, idempotency, framing) or hop-by-hop: a customer value
# would forge our headers or desynchronise the connection.
RESERVED_HEADERS = frozenset({
    "webhook-id", "webhook-timestamp", "webhook-signature",
    "host", "content-length", "transfer-encoding", "connection", "keep-alive",
    "te", "trailer", "upgrade", "expect", "proxy-authorization", "proxy-connection",
})
RESERVED_HEADER_PREFIX = "x-cronsvc-"

MAX_HEADERS = 50
MAX_HEADER_NAME = 256
MAX_HEADER_VALUE = 8192
MAX_BODY_CHARS = 65536
MAX_TIMEOUT_SECONDS = 300.0
MAX_REDIRECTS = 10
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
# What a browser-like client sends unless the customer's headers say otherwise.
DEFAULT_HEADERS = {"Accept": "*/*", "Accept-Encoding": "gzip, deflate"}

_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
# Printable ASCII and tab: CR/LF/NUL would split or end the header block, and non-ASCII
# bytes are refused by http.client at send time anyway.
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
_BEARER_TOKEN = re.compile(r"[\x21-\x7e]+")  # sent as is: printable ASCII, no spaces
_BASIC_CREDENTIAL = re.compile(r"[^\x00-\x1f\x7f]*")  # base64-encoded: any text but controls


@dataclass(frozen=True)
class RequestSpec:
    url: str
    method: str = "GET"
    # repr=False: credentials must not reach logs or Sentry's frame variables via repr().
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    body: str = field(default="", repr=False)
    body_format: str = "raw"  # raw | json | form
    auth: Mapping[str, str] | None = field(default=None, repr=False)  # {"type": "basic"|"bearer", ...}
    connect_timeout: float = 5.0
    timeout: float = 30.0  # total, connect through last body byte
    follow_redirects: bool = False
    max_redirects: int = 5


@dataclass(frozen=True)
class PreparedDelivery:
    """One attempt, ready to send: everything rendered, signed and encoded."""

    method: str
    url: str
    headers: Mapping[str, str] = field(repr=False)  # credentials, signatures: not in repr()
    body: bytes = field(repr=False)
    connect_timeout: float
    timeout: float
    follow_redirects: bool
    max_redirects: int


def validate_spec(
    spec: RequestSpec,
    *,
    known_variables: Container[str] = STANDARD_VARIABLES,
    max_timeout: float = MAX_TIMEOUT_SECONDS,
) -> None:
    """Refuse a spec that cannot be sent as asked. The URL is the guard's business
    (``guard.check_url_at_save``)."""
    if spec.method not in METHODS:
        raise InvalidRequest("invalid_method", "method", f"method must be one of {sorted(METHODS)}")
    validate_headers(spec.headers)
    _validate_body(spec, known_variables)
    _validate_auth(spec.auth, spec.headers)
    _validate_limits(spec, max_timeout)


def validate_headers(headers: Mapping[str, str]) -> None:
    """Refuse malformed, duplicated and reserved header names and unsafe values."""
    if len(headers) > MAX_HEADERS:
        raise InvalidRequest("invalid_header", "headers", f"at most {MAX_HEADERS} headers")
    seen: set[str] = set()
    for name, value in headers.items():
        _validate_header(name, value)
        lowered = name.lower()
        if lowered in seen:
            raise InvalidRequest("duplicate_header", f"headers.{name}", "header given twice")
        seen.add(lowered)


def _validate_header(name: Any, value: Any) -> None:
    where = f"headers.{name}"
    if not isinstance(name, str) or len(name) > MAX_HEADER_NAME or not _TOKEN.fullmatch(name):
        raise InvalidRequest("invalid_header", where, "invalid header name")
    lowered = name.lower()
    if lowered in RESERVED_HEADERS or lowered.startswith(RESERVED_HEADER_PREFIX):
        raise InvalidRequest("reserved_header", where, f"{name} is set by cronsvc")
    if not isinstance(value, str) or len(value) > MAX_HEADER_VALUE:
        raise InvalidRequest("invalid_header", where, "header value must be a string")
    if not _HEADER_VALUE.fullmatch(value):
        raise InvalidRequest(
            "invalid_header", where, "header value may hold printable ASCII only (no CR, LF, NUL)"
        )
    if value != value.strip(" \t"):
        raise InvalidRequest("invalid_header", where, "header value has surrounding whitespace")


def _validate_body(spec: RequestSpec, known_variables: Container[str]) -> None:
    if spec.body_format not in BODY_FORMATS:
        raise InvalidRequest("invalid_body_format", "body_format", f"one of {sorted(BODY_FORMATS)}")
    if not spec.body:
        return
    if spec.method in METHODS_WITHOUT_BODY:
        raise InvalidRequest("body_not_allowed", "body", f"a {spec.method} request has no body")
    if len(spec.body) > MAX_BODY_CHARS:
        raise InvalidRequest("body_too_large", "body", f"at most {MAX_BODY_CHARS} characters")
    check_template(spec.body, spec.body_format, known_variables)


def _validate_auth(auth: Mapping[str, str] | None, headers: Mapping[str, str]) -> None:
    if auth is None:
        return
    if any(name.lower() == "authorization" for name in headers):
        raise InvalidRequest("conflicting_header", "headers.Authorization",
                             "remove the Authorization header or the auth setting")
    kind = auth.get("type")
    if kind == "basic":
        _validate_credential(auth, "username", _BASIC_CREDENTIAL)
        if not auth["username"] or ":" in auth["username"]:
            raise InvalidRequest("invalid_auth", "auth.username", "a non-empty username without ':'")
        _validate_credential(auth, "password", _BASIC_CREDENTIAL)
    elif kind == "bearer":
        _validate_credential(auth, "token", _BEARER_TOKEN)
    else:
        raise InvalidRequest("invalid_auth", "auth.type", "auth type must be basic or bearer")


def _validate_credential(auth: Mapping[str, str], key: str, allowed: re.Pattern[str]) -> None:
    value = auth.get(key)
    if not isinstance(value, str) or not allowed.fullmatch(value):
        raise InvalidRequest("invalid_auth", f"auth.{key}", f"invalid {key}")


def _validate_limits(spec: RequestSpec, max_timeout: float) -> None:
    if not 0 < spec.timeout <= max_timeout:
        raise InvalidRequest("invalid_timeout", "timeout", f"between 0 and {max_timeout} seconds")
    if not 0 < spec.connect_timeout <= spec.timeout:
        raise InvalidRequest("invalid_timeout", "connect_timeout", "between 0 and the timeout")
    if not 0 <= spec.max_redirects <= MAX_REDIRECTS:
        raise InvalidRequest("invalid_redirects", "max_redirects", f"between 0 and {MAX_REDIRECTS}")


def standard_variables(
    *,
    job_id: Any,
    job_name: str,
    execution_id: Any,
    scheduled_for: datetime,
    attempt: int,
    now: datetime,
) -> dict[str, Any]:
    """The variables every body template may use (extend the dict for more)."""
    return {
        "job.id": str(job_id),
        "job.name": job_name,
        "execution.id": str(execution_id),
        "scheduled_for": iso_utc(scheduled_for),
        "attempt": attempt,
        "now": iso_utc(now),
    }


def build_headers(
    spec: RequestSpec,
    *,
    body: bytes,
    job_id: Any,
    execution_id: Any,
    attempt: int,
    scheduled_for: datetime,
    signing_secrets: Sequence[str],
    timestamp: int,
    version: str,
) -> dict[str, str]:
    """The headers of one attempt. ``body`` is the rendered body the signature covers.

    ``webhook-id`` is the execution id: the same on every retry, so receivers can
    de-duplicate. Customer headers may replace User-Agent and Content-Type, nothing of ours.
    """
    validate_headers(spec.headers)  # again: stored specs may predate today's rules
    headers = {"User-Agent": f"cronsvc/{version}", **spec.headers}
    if body and not any(name.lower() == "content-type" for name in spec.headers):
        headers["Content-Type"] = CONTENT_TYPES[spec.body_format]
    headers.update({
        "X-Cronsvc-Job-Id": str(job_id),
        "X-Cronsvc-Execution-Id": str(execution_id),
        "X-Cronsvc-Attempt": str(attempt),
        "X-Cronsvc-Scheduled-For": iso_utc(scheduled_for),
        "webhook-id": str(execution_id),
        "webhook-timestamp": str(timestamp),
    })
    if signing_secrets:
        headers["webhook-signature"] = signing.sign(signing_secrets, str(execution_id), timestamp, body)
    if spec.auth is not None:
        headers["Authorization"] = _authorization(spec.auth)
    return headers


def _authorization(auth: Mapping[str, str]) -> str:
    if auth["type"] == "basic":
        pair = f"{auth['username']}:{auth['password']}".encode()
        return "Basic " + base64.b64encode(pair).decode("ascii")
    return "Bearer " + auth["token"]


def prepare(
    spec: RequestSpec,
    *,
    variables: Mapping[str, Any],
    job_id: Any,
    execution_id: Any,
    attempt: int,
    scheduled_for: datetime,
    signing_secrets: Sequence[str],
    timestamp: int,
    version: str,
) -> PreparedDelivery:
    """Render, sign and encode one attempt of ``spec``."""
    body = render_body(spec.body, variables, spec.body_format).encode("utf-8")
    headers = build_headers(
        spec, body=body, job_id=job_id, execution_id=execution_id, attempt=attempt,
        scheduled_for=scheduled_for, signing_secrets=signing_secrets,
        timestamp=timestamp, version=version,
    )
    return PreparedDelivery(
        method=spec.method, url=spec.url, headers=headers, body=body,
        connect_timeout=spec.connect_timeout, timeout=spec.timeout,
        follow_redirects=spec.follow_redirects, max_redirects=spec.max_redirects,
    )


def with_default_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The first hop's headers: ``headers`` plus the ``DEFAULT_HEADERS`` they do not set."""
    merged = dict(_defaults_not_in(tuple(headers)))
    merged.update(headers)
    return merged


@lru_cache(maxsize=1024)
def _defaults_not_in(names: tuple[str, ...]) -> dict[str, str]:
    # Per distinct set of header names (a job sends the same names run after run), not per
    # delivery; the caller copies it.
    given = {name.lower() for name in names}
    return {name: value for name, value in DEFAULT_HEADERS.items() if name.lower() not in given}


def redirected(status: int, method: str, body: bytes, headers: dict[str, str],
               old_url: str, new_url: str) -> tuple[str, bytes, dict[str, str]]:
    """The next hop's method, body and headers, with the rules browsers and requests follow."""
    headers = dict(headers)
    if (status in (302, 303) and method != "HEAD") or (status == 301 and method == "POST"):
        method, body = "GET", b""
        _drop(headers, {"content-type"})
    if _origin(old_url) != _origin(new_url):
        # The customer's credentials are for the host they named, not wherever it points.
        _drop(headers, {"authorization", "cookie"})
    return method, body, headers


def _drop(headers: dict[str, str], lowered_names: set[str]) -> None:
    for name in [n for n in headers if n.lower() in lowered_names]:
        del headers[name]


def _origin(url: str) -> tuple[str, str | None, int | None]:
    parts = urlsplit(url)
    return parts.scheme.lower(), parts.hostname, parts.port
