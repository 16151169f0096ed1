"""The ping URLs straight from the WSGI environ: /ping/... skips Django's request handling.

A ping carries no cookie, session, CSRF token or login, and its answer is ``OK``. Through
Django's handler it would pay for the request and response objects, the request signals, URL
resolution and the middleware chain: about half of its CPU (bench/README.md, "Figures behind
the code"), on the path customers' jobs hit most. The fast lane parses the path itself and
calls ``ping_views.answer`` (the same behaviour the URLconf's view serves), keeping what every
request gets: the request id, the latency metric, the access log line, the security headers and
the request size limits.

Anything out of the ordinary (a path the ping URL does not match, a request over the size
limits, HTTPS redirection turned on) goes through ``PingHandler``: Django's handler with
only the middleware a ping needs, which answers it exactly as the site does.
"""

import logging
import re
import time
import uuid
from http import HTTPStatus
from urllib.parse import parse_qsl

import sentry_sdk
from django.conf import settings
from django.core.handlers.exception import convert_exception_to_response
from django.core.handlers.wsgi import WSGIHandler
from django.db import connection
from django.utils.module_loading import import_string

from apps.api.middleware import limits_refusal
from apps.observability import metrics
from apps.observability.middleware import REQUEST_ID_HEADER, SAFE_REQUEST_ID, log_access

from . import ping_views

PREFIX = "/ping/"
PING_URL = re.compile("/" + ping_views.PING_PATH)
MIDDLEWARE = [
    "apps.observability.middleware.RequestMetricsMiddleware",
    "apps.observability.middleware.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "apps.api.middleware.RequestLimitsMiddleware",
]
ENDPOINT = "monitor-ping"  # the URLconf's name, the latency metric's label either way
log = logging.getLogger(__name__)


class PingHandler(WSGIHandler):
    """Django's WSGI handler (signals, connection handling, URL resolution, error pages)
    with MIDDLEWARE instead of settings.MIDDLEWARE."""

    def load_middleware(self, is_async=False):
        self._view_middleware, self._template_response_middleware, self._exception_middleware = [], [], []
        handler = convert_exception_to_response(self._get_response)
        for path in reversed(MIDDLEWARE):
            handler = convert_exception_to_response(import_string(path)(handler))
        self._middleware_chain = handler


def security_headers(secure):
    """What django.middleware.security.SecurityMiddleware adds to an answer."""
    headers = []
    if secure and settings.SECURE_HSTS_SECONDS:
        value = f"max-age={settings.SECURE_HSTS_SECONDS}"
        value += "; includeSubDomains" * settings.SECURE_HSTS_INCLUDE_SUBDOMAINS
        value += "; preload" * settings.SECURE_HSTS_PRELOAD
        headers.append(("Strict-Transport-Security", value))
    if settings.SECURE_CONTENT_TYPE_NOSNIFF:
        headers.append(("X-Content-Type-Options", "nosniff"))
    if settings.SECURE_REFERRER_POLICY:
        headers.append(("Referrer-Policy", settings.SECURE_REFERRER_POLICY))
    if settings.SECURE_CROSS_ORIGIN_OPENER_POLICY:
        headers.append(("Cross-Origin-Opener-Policy", settings.SECURE_CROSS_ORIGIN_OPENER_POLICY))
    return headers


def within_limits(environ):
    """Whether RequestLimitsMiddleware would let the request through (it answers the rest)."""
    query = environ.get("QUERY_STRING", "")
    url_length = len(environ.get("PATH_INFO", "")) + (len(query) + 1 if query else 0)  # get_full_path's
    return limits_refusal(environ, url_length) is None


# A connection whose last ping statement worked this recently skips Django's health check
# (a SELECT 1 round trip per request: bench/README.md, "Figures behind the code"); one idle
# for longer is checked.
TRUSTED_FOR = 1.0


def trust_connection():
    used_at = getattr(connection, "ping_used_at", None)
    if used_at is not None and time.monotonic() - used_at < TRUSTED_FOR:
        connection.health_check_done = True


def release_connection():
    """What request_finished does (CONN_MAX_AGE, a connection left broken or in a transaction),
    noting when the connection last worked."""
    if connection.in_atomic_block:  # (a test's transaction outlives its requests)
        return
    worked = connection.connection is not None and not connection.errors_occurred
    connection.close_if_unusable_or_obsolete()
    connection.ping_used_at = time.monotonic() if worked and connection.connection is not None else None


def _rid(query):
    rid = ""
    for name, value in parse_qsl(query, keep_blank_values=True, errors="replace"):
        if name == "rid":
            rid = value  # the last one, as Django's QueryDict.get reads it
    return rid


class PingFastLane:
    """WSGI application: /ping/... answered here (or by PingHandler), the rest by ``application``."""

    def __init__(self, application):
        self.application = application
        self.pings = PingHandler()
        self.enabled = not settings.SECURE_SSL_REDIRECT  # a redirect is the middleware's to decide

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if not path.startswith(PREFIX):
            return self.application(environ, start_response)
        match = PING_URL.fullmatch(path) if self.enabled else None
        if match is None or not within_limits(environ):
            return self.pings(environ, start_response)
        return self.serve(environ, start_response, match)

    def serve(self, environ, start_response, match):
        started = time.perf_counter()
        incoming = environ.get("HTTP_X_REQUEST_ID", "")
        request_id = incoming if SAFE_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        method = environ.get("REQUEST_METHOD", "GET")
        trust_connection()
        try:
            result = self.answer(environ, method, match)
        finally:
            release_connection()
        headers = [("Content-Type", result.content_type), ("Content-Length", str(len(result.body))),
                   *result.headers.items(), (REQUEST_ID_HEADER, request_id),
                   *security_headers(environ.get("wsgi.url_scheme") == "https")]
        start_response(f"{result.status} {HTTPStatus(result.status).phrase}", headers)
        seconds, label = time.perf_counter() - started, method if method in ping_views.ALLOWED else "other"
        metrics.API_LATENCY.labels(ENDPOINT, label, str(result.status)).observe(seconds)
        log_access(label, environ.get("PATH_INFO", ""), result.status, seconds, request_id,
                   environ.get("REMOTE_ADDR", ""))
        return [b"" if method == "HEAD" else result.body]

    def answer(self, environ, method, match):
        stream = environ["wsgi.input"]
        try:
            return ping_views.answer(
                method=method, ping_id=match["ping_id"], action=match["action"],
                rid=_rid(environ.get("QUERY_STRING", "")), read_body=stream.read,
                remote_addr=environ.get("REMOTE_ADDR", ""), user_agent=environ.get("HTTP_USER_AGENT", ""))
        except Exception as error:  # noqa: BLE001 - a ping's failure is answered, reported and logged
            sentry_sdk.capture_exception(error)
            log.exception("ping failed")
            return ping_views.Answer(500, b'{"error": {"code": "server_error", "message": '
                                          b'"Something went wrong on our side; it has been logged. Ping again.", "fields": {}}}',
                                     "application/json")
