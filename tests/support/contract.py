"""Every API answer a test receives is checked against the OpenAPI schema the API serves
(openapi-core): schema and behaviour cannot drift apart unnoticed.

tests/conftest.py wraps Django's test client with ``check_response``; a test that means
to receive an answer the schema does not describe says so with ``@pytest.mark.off_contract``.
"""

from __future__ import annotations

import json
from functools import cache

from openapi_core import OpenAPI
from openapi_core.templating.paths.exceptions import OperationNotFound, PathNotFound
from openapi_core.testing import MockRequest, MockResponse

PREFIX = "/api/v1/"
# The schema document itself, and the docs page, describe the API; they are not in it.
NOT_OPERATIONS = ("/api/v1/schema/",)


@cache
def _openapi() -> OpenAPI:
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    return OpenAPI.from_dict(json.loads(json.dumps(schema, default=str)))


def checked(path: str) -> bool:
    return path.startswith(PREFIX) and not path.startswith(NOT_OPERATIONS)


def check_response(request, response) -> None:
    """Raise AssertionError when ``response`` (to the WSGI request that made it) breaks the
    schema: an undocumented status, content type, header or body shape."""
    path = request.path
    if not checked(path) or getattr(response, "streaming", False):
        return
    if response.status_code == 405:  # about the method, not an operation: it may have none
        assert _is_error_envelope(response), f"{request.method} {path} -> 405 without the error envelope"
        return
    mock_request = MockRequest(
        "http://testserver", request.method.lower(), path,
        args=dict(request.GET.items()), content_type=request.content_type or "application/json")
    mock_response = MockResponse(
        response.content, status_code=response.status_code,
        headers=dict(response.headers.items()),
        content_type=response.get("Content-Type", "").split(";")[0].strip())
    try:
        _openapi().validate_response(mock_request, mock_response)
    except (PathNotFound, OperationNotFound) as error:
        # no operation to describe it (an unknown path, or a method the path lacks): the
        # answer is still a refusal in the error envelope every client reads
        if not (400 <= response.status_code < 500 and _is_error_envelope(response)):
            raise AssertionError(f"{request.method} {path} -> {response.status_code}: not an operation "
                                 f"of the schema, and not a 4xx error envelope") from None
    except Exception as error:  # openapi-core's errors name the part that broke the schema
        detail = "; ".join(str(e) for e in getattr(error, "schema_errors", []) or [])
        raise AssertionError(
            f"{request.method} {path} -> {response.status_code} breaks the OpenAPI schema: "
            f"{type(error).__name__}: {error} {detail}\nbody: {response.content[:500]!r}") from None


def _is_error_envelope(response) -> bool:
    try:
        error = json.loads(response.content)["error"]
    except (ValueError, KeyError, TypeError):
        return False
    return isinstance(error, dict) and {"code", "message", "fields"} <= set(error)
