"""Request id (accepted or made, bound to the log context, echoed), request latency and the
access log: one structured record per request (logger ``cronsvc.access``; JSON under
LOG_FORMAT=json) with its request id. It replaces granian's own access log, which is plain
text and knows no request id."""

import re
import time
import uuid

import structlog

from . import metrics

REQUEST_ID_HEADER = "X-Request-Id"
# A caller's id is kept only if it is short and plain (it ends up in logs and headers).
SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
ACCESS_LOG = structlog.get_logger("cronsvc.access")
# Any other method is one label value, so made-up methods cannot grow the label set.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestIdMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        incoming = request.META.get("HTTP_X_REQUEST_ID", "")
        request_id = incoming if SAFE_REQUEST_ID.match(incoming) else uuid.uuid4().hex
        request.request_id = request_id
        tokens = structlog.contextvars.bind_contextvars(request_id=request_id)
        try:
            response = self.get_response(request)
        finally:
            structlog.contextvars.reset_contextvars(**tokens)
        response[REQUEST_ID_HEADER] = request_id
        return response


class RequestMetricsMiddleware:
    """Latency by route name (never the raw path: ids would explode the label set), and the
    request's access log line."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        endpoint = (match.view_name or match.route) if match else "unmatched"
        method = request.method if request.method in _METHODS else "other"
        seconds = time.perf_counter() - started
        metrics.API_LATENCY.labels(endpoint, method, str(response.status_code)).observe(seconds)
        log_access(method, request.path, response.status_code, seconds, getattr(request, "request_id", None),
                   request.META.get("REMOTE_ADDR", ""))
        return response


def log_access(method, path, status, seconds, request_id, remote_addr):
    """The access log line of one request (the path without its query string, which may hold
    what a caller would not want logged)."""
    ACCESS_LOG.info("request", method=method, path=path, status=status, duration_ms=round(seconds * 1000, 1),
                    request_id=request_id, remote_addr=remote_addr)
