"""Request id (accepted or made, bound to the log context, echoed) and request latency."""

import re
import time
import uuid

import structlog

from . import metrics

REQUEST_ID_HEADER = "X-Request-Id"
# A caller's id is kept only if it is short and plain (it ends up in logs and headers).
SAFE_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
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
    """Latency by route name (never the raw path: ids would explode the label set)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        endpoint = (match.view_name or match.route) if match else "unmatched"
        method = request.method if request.method in _METHODS else "other"
        metrics.API_LATENCY.labels(endpoint, method, str(response.status_code)).observe(
            time.perf_counter() - started)
        return response
