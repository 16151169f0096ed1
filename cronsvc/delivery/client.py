"""Send one prepared delivery and report what happened, never raising for network trouble."""

from __future__ import annotations

import http.client
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import urljoin, urlsplit

import certifi
import urllib3
import urllib3.exceptions
from urllib3.exceptions import NameResolutionError, NewConnectionError

from .deadline import Cancellation, DeadlineScope, deadline_scope
from .guard import AddressPolicy, ForbiddenTarget, check_url
from .request import PreparedDelivery
from .transport import guarded_pool_manager

DEFAULT_MAX_BODY_BYTES = 16384
CANCELLED = "cancelled"
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
_READ_CHUNK = 65536
# What a browser-like client sends unless the customer's headers say otherwise.
DEFAULT_HEADERS = {"Accept": "*/*", "Accept-Encoding": "gzip, deflate"}


@dataclass(frozen=True)
class DeliveryResult:
    status_code: int | None
    headers: dict[str, str]  # names lowercased
    body_excerpt: str
    body_truncated: bool
    duration_ms: float
    remote_addr: str | None
    error_kind: str | None  # timeout | connect_error | dns_error | tls_error | forbidden_target | cancelled
    error_message: str | None
    final_url: str | None = field(default=None)  # after redirects


class DeliverySession:
    """A worker's pooled connections, reused across deliveries and shared by its threads.

    urllib3 directly, not requests: requests costs several times urllib3's CPU per request
    (bench/README.md, "Figures behind the code"), the most expensive step of a delivery, and
    its extras are what a multi-tenant sender must switch off anyway — environment proxies
    would bypass the guard, ~/.netrc would hand the worker's credentials to customer endpoints,
    and a cookie jar would carry one customer's cookies to another's request.
    """

    def __init__(self, policy: AddressPolicy, *, pool_connections: int, pool_maxsize: int,
                 ca_bundle: str | None) -> None:
        self.policy = policy
        self.pools = guarded_pool_manager(policy, num_pools=pool_connections, maxsize=pool_maxsize,
                                          ca_certs=ca_bundle or certifi.where())

    def urlopen(self, method: str, url: str, **kwargs: Any) -> urllib3.BaseHTTPResponse:
        return self.pools.urlopen(method, url, redirect=False, retries=False, preload_content=False,
                                  **kwargs)

    def close(self) -> None:
        self.pools.clear()


def make_session(
    policy: AddressPolicy,
    *,
    pool_connections: int = 100,
    pool_maxsize: int = 10,
    ca_bundle: str | None = None,
) -> DeliverySession:
    """A pooled session for a worker to reuse across deliveries.

    ``pool_connections`` is how many hosts keep a pool, ``pool_maxsize`` how many idle
    connections each keeps. ``ca_bundle`` replaces the default CA certificates (certifi's).
    """
    return DeliverySession(policy, pool_connections=pool_connections, pool_maxsize=pool_maxsize,
                           ca_bundle=ca_bundle)


def deliver(
    prepared: PreparedDelivery,
    *,
    session: DeliverySession,
    policy: AddressPolicy,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    now_fn: Callable[[], float] = time.monotonic,
    cancellation: Cancellation | None = None,
) -> DeliveryResult:
    """Send ``prepared`` within its total timeout; map every failure to an error kind.

    ``cancellation.cancel()`` (from another thread) ends the delivery at once, its
    connection shut down: the result's error kind is then ``cancelled``.

    ``policy`` must be the one ``session`` was made with: it checks each hop's URL here,
    the session's adapter checks each connection's address.
    """
    started = now_fn()
    with deadline_scope(prepared.timeout) as scope:
        if cancellation is not None:
            cancellation.bind(scope)
        try:
            response, url = _send(prepared, session, policy, scope)
        except Exception as exc:
            return _failed(_error_kind(exc, scope), scope, started, now_fn)
        if scope.expired:
            # Cut off while reading the headers: http.client takes a header block ended by
            # EOF as complete, so this status line cannot be trusted.
            response.close()
            return _failed(_error_kind(None, scope), scope, started, now_fn)
        with response:
            body, truncated, error = _read_body(response, max_body_bytes, scope)
    kind, message = _error_kind(error, scope) if error or scope.expired else (None, None)
    return DeliveryResult(
        status_code=response.status,
        headers={name.lower(): value for name, value in response.headers.itermerged()},
        body_excerpt=_decode(body, response.headers.get("content-type", "")),
        body_truncated=truncated,
        duration_ms=_elapsed_ms(started, now_fn),
        remote_addr=scope.remote_addr,
        error_kind=kind,
        error_message=message,
        final_url=url,
    )


def _failed(kind_and_message: tuple[str, str], scope: DeadlineScope, started: float,
            now_fn: Callable[[], float]) -> DeliveryResult:
    kind, message = kind_and_message
    return DeliveryResult(None, {}, "", False, _elapsed_ms(started, now_fn),
                          scope.remote_addr, kind, message, None)


def _send(prepared: PreparedDelivery, session: DeliverySession, policy: AddressPolicy,
          scope: DeadlineScope) -> tuple[urllib3.BaseHTTPResponse, str]:
    """Send, following redirects by hand so that every hop's URL passes ``check_url``."""
    method, url, body = prepared.method, prepared.url, prepared.body
    headers = _with_defaults(prepared.headers)
    hops_left = prepared.max_redirects if prepared.follow_redirects else 0
    while True:
        check_url(url, policy)
        response = _request(session, method, url, headers, body, prepared.connect_timeout, scope)
        location = response.headers.get("location")
        if hops_left == 0 or response.status not in REDIRECT_STATUSES or not location:
            return response, url
        response.close()
        hops_left -= 1
        next_url = urljoin(url, location)
        method, body, headers = _redirected(response.status, method, body, headers,
                                            url, next_url)
        url = next_url


def _with_defaults(headers) -> dict[str, str]:
    given = {name.lower() for name in headers}
    merged = {name: value for name, value in DEFAULT_HEADERS.items() if name.lower() not in given}
    merged.update(headers)
    return merged


def _request(session, method, url, headers, body, connect_timeout, scope) -> urllib3.BaseHTTPResponse:
    remaining = scope.remaining()
    if remaining <= 0 or scope.expired:  # expired early: cancelled
        raise TimeoutError("total deadline passed")
    scope.request_started = False  # per hop: set by the connection once it starts sending
    return session.urlopen(
        method, url, headers=headers, body=body or None,
        # The read timeout is per socket read; the scope's watchdog enforces the total.
        timeout=urllib3.Timeout(connect=min(connect_timeout, remaining), read=remaining),
    )


def _redirected(status: int, method: str, body: bytes, headers: dict[str, str],
                old_url: str, new_url: str) -> tuple[str, bytes, dict[str, str]]:
    """The next hop's request, with the rules browsers and requests follow."""
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


def _read_body(response: urllib3.BaseHTTPResponse, limit: int,
               scope: DeadlineScope) -> tuple[bytes, bool, Exception | None]:
    """Read at most ``limit`` bytes (one more to know about truncation).

    A body read to its end returns the connection to the pool; a truncated one is closed.
    """
    chunks: list[bytes] = []
    wanted = limit + 1
    try:
        while wanted > 0:
            chunk = response.read(min(wanted, _READ_CHUNK), decode_content=True)
            if not chunk:
                break
            chunks.append(chunk)
            wanted -= len(chunk)
    except (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as exc:
        return b"".join(chunks)[:limit], False, exc
    body = b"".join(chunks)
    return body[:limit], len(body) > limit, None


def _error_kind(exc: BaseException | None, scope: DeadlineScope) -> tuple[str, str]:
    if scope.cancelled:
        return CANCELLED, "cancelled while in flight; the connection was closed"
    if isinstance(exc, ForbiddenTarget):
        return "forbidden_target", exc.reason
    if isinstance(exc, NameResolutionError) or _caused_by(exc, NameResolutionError):
        return "dns_error", "the host name does not resolve"
    # urllib3's NewConnectionError (a refused connection) descends from its timeout class.
    refused = isinstance(exc, NewConnectionError)
    timed_out = scope.expired or (not refused and isinstance(exc, (
        urllib3.exceptions.TimeoutError, TimeoutError)))
    if timed_out and not scope.request_started:
        # Nothing was sent (TCP connect or TLS handshake): as safe to retry as a refusal.
        return "connect_error", "timed out while connecting"
    if timed_out:
        return "timeout", "no complete response within the timeout"
    if isinstance(exc, urllib3.exceptions.SSLError) or _caused_by(exc, urllib3.exceptions.SSLError):
        return "tls_error", _message(exc)
    if isinstance(exc, (urllib3.exceptions.HTTPError, http.client.HTTPException, OSError)):
        return "connect_error", _message(exc)
    raise exc  # type: ignore[misc]  # a bug, not a delivery failure: let it surface


def _caused_by(exc: BaseException | None, kind: type[BaseException]) -> bool:
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, kind):
            return True
        for arg in getattr(exc, "args", ()):
            if isinstance(arg, kind) or isinstance(getattr(arg, "reason", None), kind):
                return True
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return False


def _message(exc: BaseException | None) -> str:
    text = str(exc) if exc is not None else ""
    return text[:500] or type(exc).__name__


def _decode(body: bytes, content_type: str) -> str:
    charset = "utf-8"
    for param in content_type.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip('"')
    try:
        return body.decode(charset, errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


def _elapsed_ms(started: float, now_fn: Callable[[], float]) -> float:
    return (now_fn() - started) * 1000.0
