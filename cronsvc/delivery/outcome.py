"""What a delivery brought back (``DeliveryResult``) and whether it succeeded: success
criteria and the classification of a result."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .errors import InvalidRequest
from .saferegex import compile_pattern

MAX_BODY_CONTAINS = 1024

# The error kind of a delivery ended on purpose while in flight (``Cancellation``).
CANCELLED = "cancelled"
# Error kinds, beyond the transport ones DeliveryResult reports
# (timeout, connect_error, dns_error, tls_error, forbidden_target, cancelled, invalid_response):
HTTP_3XX = "http_3xx"  # a redirect not followed (or too many) and not accepted
HTTP_4XX = "http_4xx"
HTTP_5XX = "http_5xx"
UNEXPECTED_STATUS = "unexpected_status"  # e.g. 204 when the criteria ask for 200 only
BODY_MISMATCH = "body_mismatch"
CIRCUIT_OPEN = "circuit_open"
# The endpoint answered, but not in HTTP (a bad status line or header, another protocol):
# its request went out, so it is metered, and it is retried like a 5xx.
INVALID_RESPONSE = "invalid_response"

#: The error kinds of an attempt whose request never left: refused by the outbound guard
#: or as invalid, the name did not resolve, the connection (TCP, or its TLS handshake) was
#: not made, the circuit was open. Every other attempt sent its request (a timeout waiting
#: for the response, a 5xx, a cut connection after the request went out).
NOT_SENT = frozenset({"forbidden_target", "invalid_request", "dns_error", "connect_error", "tls_error", CIRCUIT_OPEN})


def storable_text(text: str) -> str:
    """``text`` as a database keeps it and any JSON writer writes it: a NUL (which
    PostgreSQL's text and jsonb refuse) becomes U+FFFD; a byte the HTTP parser could not
    decode as UTF-8 (it hands such a byte over as a lone surrogate, ``surrogateescape``)
    becomes the Latin-1 character it is, HTTP's historical charset for header values (RFC
    9110, 5.5), so a legacy endpoint's file name "café.txt" sent in Latin-1 reads as written;
    any other lone surrogate becomes U+FFFD. Every result an endpoint or a script sends back
    passes here before it is kept or shown: an answer must never fail its own recording."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    return text if text.isascii() else _SURROGATE.sub(_as_latin1, text)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _as_latin1(match: re.Match) -> str:
    code = ord(match.group())
    return chr(code - 0xDC00) if 0xDC80 <= code <= 0xDCFF else "\ufffd"


@dataclass(frozen=True)
class DeliveryResult:
    status_code: int | None
    headers: dict[str, str]  # names lowercased
    body_excerpt: str
    body_truncated: bool
    duration_ms: float
    remote_addr: str | None
    error_kind: str | None  # timeout | connect_error | dns_error | tls_error | forbidden_target | cancelled | invalid_response
    error_message: str | None
    final_url: str | None = field(default=None)  # after redirects


def request_started(error_kind: str | None) -> bool:
    """Did the attempt's request really start (reach the endpoint's connection)? What usage
    meters (docs/billing.md)."""
    return error_kind not in NOT_SENT


@dataclass(frozen=True)
class SuccessCriteria:
    """``status_codes`` holds ints and/or ranges; the default accepts any 2xx.

    ``accept_redirect_status`` also accepts a 3xx as it is (when redirects are not followed).
    The body criteria look at the captured excerpt only (``max_body_bytes`` of the body).
    """

    status_codes: tuple[range, ...] = (range(200, 300),)
    accept_redirect_status: bool = False
    body_contains: str | None = None
    body_regex: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status_codes", _as_ranges(self.status_codes))

    def accepts_status(self, status: int) -> bool:
        if self.accept_redirect_status and 300 <= status < 400:
            return True
        return any(status in codes for codes in self.status_codes)


@dataclass(frozen=True)
class Outcome:
    succeeded: bool
    error_kind: str | None
    message: str


def _as_ranges(codes: Iterable[int | range]) -> tuple[range, ...]:
    return tuple(c if isinstance(c, range) else range(c, c + 1) for c in codes)


def parse_status_codes(text: str) -> tuple[range, ...]:
    """``"200-299, 304"`` -> ranges; raises InvalidRequest(``invalid_status_codes``)."""
    ranges = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        low, _, high = item.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise InvalidRequest("invalid_status_codes", "status_codes", f"{item!r} is not a code") from None
        ranges.append(range(first, last + 1))
    criteria = SuccessCriteria(status_codes=tuple(ranges))
    validate_criteria(criteria)
    return criteria.status_codes


def validate_criteria(criteria: SuccessCriteria) -> None:
    """Refuse criteria that could never pass or that we will not run."""
    if not criteria.status_codes or any(
        not codes or codes.start < 100 or codes.stop > 600 for codes in criteria.status_codes
    ):
        raise InvalidRequest("invalid_status_codes", "status_codes", "status codes between 100 and 599")
    if criteria.body_contains is not None and not 0 < len(criteria.body_contains) <= MAX_BODY_CONTAINS:
        raise InvalidRequest("invalid_body_contains", "body_contains",
                             f"between 1 and {MAX_BODY_CONTAINS} characters")
    if criteria.body_regex is not None:
        compile_pattern(criteria.body_regex)


def classify(result: DeliveryResult, criteria: SuccessCriteria) -> Outcome:
    if result.error_kind is not None:
        return Outcome(False, result.error_kind, result.error_message or result.error_kind)
    status = result.status_code
    assert status is not None
    if not criteria.accepts_status(status):
        return Outcome(False, _status_kind(status), f"HTTP {status}")
    mismatch = _body_mismatch(result.body_excerpt, criteria)
    if mismatch:
        return Outcome(False, BODY_MISMATCH, f"HTTP {status}, but {mismatch}")
    return Outcome(True, None, f"HTTP {status}")


def circuit_open(host: str, retry_at: float | None) -> Outcome:
    """The outcome of a delivery the breaker did not let through."""
    return Outcome(False, CIRCUIT_OPEN, f"{host} is failing; circuit open until {retry_at}")


def _status_kind(status: int) -> str:
    if 300 <= status < 400:
        return HTTP_3XX
    if 400 <= status < 500:
        return HTTP_4XX
    if 500 <= status < 600:
        return HTTP_5XX
    return UNEXPECTED_STATUS


def _body_mismatch(body: str, criteria: SuccessCriteria) -> str | None:
    if criteria.body_contains is not None and criteria.body_contains not in body:
        return f"the body does not contain {criteria.body_contains!r}"
    if criteria.body_regex is not None and not compile_pattern(criteria.body_regex).search(body):
        return f"the body does not match {criteria.body_regex!r}"
    return None
