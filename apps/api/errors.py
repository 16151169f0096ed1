"""One error format for the whole API, whatever raised it:

    {"error": {"code": "<stable_code>", "message": "<for a person>", "fields": {"<path>": ["..."]}}}

``code`` is the first error's code; ``fields`` maps dotted input paths (``request.url``,
``schedule.expression``, ``tags.0``) to messages. Some errors add keys (``plan_limit``
names the limit and the plan that allows it).
"""

import logging

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.http import Http404, JsonResponse
from django.views import defaults
from rest_framework import exceptions, status
from rest_framework.views import exception_handler as drf_exception_handler

log = logging.getLogger(__name__)
API_PREFIX = "/api/"


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "The request conflicts with the current state of the resource."
    default_code = "conflict"


class PlanLimitExceeded(exceptions.APIException):
    """402: the plan does not allow this; ``plan`` names the cheapest plan that does."""

    status_code = status.HTTP_402_PAYMENT_REQUIRED
    default_code = "plan_limit"

    def __init__(self, message, *, limit, plan=None, field=None, reason=None):
        super().__init__(message, self.default_code)
        self.extra = {"limit": limit, "plan": plan}
        if reason:
            self.extra["reason"] = reason
        self.fields = {field: [message]} if field else {}


class InvalidCursor(exceptions.ValidationError):
    default_code = "invalid_cursor"


def exception_handler(exc, context):
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    response = drf_exception_handler(exc, context)  # keeps Retry-After, WWW-Authenticate
    if response is not None:
        response.data = {"error": error_body(exc)}
    return response


def error_body(exc):
    if isinstance(exc, exceptions.ValidationError):
        fields = flatten(exc.detail)
        code, message = _first(exc.detail)
        body = {"code": code, "message": message, "fields": fields}
    else:
        code = _detail_code(exc)
        body = {"code": code, "message": str(exc.detail), "fields": getattr(exc, "fields", {})}
    body.update(getattr(exc, "extra", {}))
    return body


def _detail_code(exc):
    detail = exc.detail
    return getattr(detail, "code", None) or exc.default_code


def flatten(detail, path=""):
    """Nested DRF error details -> {"a.b.0": ["message", ...]}."""
    if isinstance(detail, dict):
        out = {}
        for key, value in detail.items():
            key = "" if key == "non_field_errors" else str(key)
            out.update(flatten(value, f"{path}.{key}" if path and key else path or key))
        return out
    if isinstance(detail, list) and any(isinstance(item, (dict, list)) for item in detail):
        out = {}
        for index, item in enumerate(detail):
            out.update(flatten(item, f"{path}.{index}" if path else str(index)))
        return out
    items = detail if isinstance(detail, list) else [detail]
    return {path or "non_field_errors": [str(item) for item in items]}


def _first(detail, path=""):
    """(code, message) of the first leaf error, the message prefixed with its path."""
    if isinstance(detail, dict):
        for key, value in detail.items():
            key = "" if key == "non_field_errors" else str(key)
            return _first(value, f"{path}.{key}" if path and key else path or key)
    if isinstance(detail, list):
        for index, item in enumerate(detail):
            nested = isinstance(item, (dict, list))
            return _first(item, (f"{path}.{index}" if path else str(index)) if nested else path)
        return "invalid", "Invalid input."
    code = getattr(detail, "code", None) or "invalid"
    message = str(detail)
    return code, f"{path}: {message}" if path and not message.startswith(f"{path}:") else message


# --- Django-level handlers: errors raised outside DRF views still answer JSON under /api/.

def _json_error(status_code, code, message):
    return JsonResponse({"error": {"code": code, "message": message, "fields": {}}}, status=status_code)


def handler404(request, exception=None):
    if request.path.startswith(API_PREFIX):
        return _json_error(404, "not_found", "Not found.")
    return defaults.page_not_found(request, exception)


def handler500(request):
    if request.path.startswith(API_PREFIX):
        return _json_error(500, "server_error", "Something went wrong on our side; it has been logged.")
    return defaults.server_error(request)


def handler403(request, exception=None):
    if request.path.startswith(API_PREFIX):
        return _json_error(403, "permission_denied", "You do not have permission to perform this action.")
    return defaults.permission_denied(request, exception)


def handler400(request, exception=None):
    if request.path.startswith(API_PREFIX):
        return _json_error(400, "bad_request", "Bad request.")
    return defaults.bad_request(request, exception)
