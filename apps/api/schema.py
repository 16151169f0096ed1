"""OpenAPI: the API-key security scheme, and the error responses every operation documents."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse

ERROR_CODES = {
    "invalid": "a field is malformed (generic)",
    "required": "a required field is missing",
    "unknown_field": "the request names a field the API does not know",
    "invalid_cron": "the cron expression is not valid",
    "unknown_timezone": "not an IANA timezone name",
    "never_fires": "the schedule (or its window) has no future run",
    "interval_too_short": "the schedule runs more often than any plan allows",
    "invalid_window": "end_at is not after start_at",
    "in_the_past": "a one-off time (or an expiry) is not in the future",
    "invalid_schedule": "the schedule object is malformed",
    "invalid_count": "count must be a whole number from 1 to 100",
    "out_of_range": "an instant outside 1970..8999 (UTC)",
    "invalid_retry": "retry.max_delay_seconds is below retry.initial_delay_seconds",
    "invalid_auth": "request.auth is malformed (or a masked secret with nothing stored)",
    "invalid_status_codes": "success.status_codes is not a list of codes and ranges within 100-599",
    "invalid_regex": "success.body_regex is not a supported regular expression",
    "unknown_variable": "the body template names a variable that does not exist",
    "body_not_allowed": "GET and HEAD requests carry no body",
    "crontab_too_large": "the crontab is above 1000 lines or 64 KiB",
    "does_not_exist": "a referenced id (project, ...) is not one of yours",
    "project_required": "no `project` given and you reach several projects (or none); `choices` lists them",
    "unique": "the value is already taken (e.g. a project slug)",
    "invalid_choice": "not one of the allowed values",
    "invalid_header": "a request header name or value is not allowed",
    "reserved_header": "a request header is set by cronsvc itself",
    "forbidden_target": "the URL points at a private, loopback or otherwise refused address",
    "invalid_host": "the URL's host is not an ASCII host name (give an international name in its xn-- form)",
    "sandbox_unavailable": "no worker can run script jobs in a sandbox now; script jobs are refused, never run unsandboxed",
    "script_env": "a script variable name or value the sandbox refuses (name [A-Za-z_][A-Za-z0-9_]*, no NUL)",
    "script_too_large": "the script is over 64 KiB (UTF-8 bytes)",
    "invalid_region": "region is not one of the configured regions",
    "invalid_cursor": "the pagination cursor is not valid",
    "invalid_flag": "a yes/no query parameter (e.g. ?force) is not true/false or 1/0",
    "parse_error": "the body is not valid JSON",
    "json_too_deep": "the JSON body nests deeper than MAX_JSON_DEPTH levels",
    "request_too_large": "the body is larger than MAX_REQUEST_BODY_BYTES (413)",
    "url_too_long": "the URL is longer than MAX_URL_LENGTH (414)",
    "headers_too_large": "the request headers total more than MAX_REQUEST_HEADER_BYTES (431)",
    "invalid_api_key": "the API key is malformed, unknown, revoked or expired, or its organization suspended",
    "not_authenticated": "no credentials were sent",
    "permission_denied": "the caller's role (or key scope) does not allow the action",
    "organization_suspended": "the organization is suspended",
    "not_found": "no such object in your organization",
    "method_not_allowed": "the HTTP method is not supported here",
    "plan_limit": "the plan does not allow this; `limit` names the limit, `plan` the cheapest plan that allows it",
    "conflict": "the request conflicts with the object's state",
    "project_not_empty": "the project still has jobs; delete with ?force=true",
    "execution_not_finished": "only finished executions can be replayed",
    "execution_finished": "the execution finished before the cancel; its outcome stands (`status` says which)",
    "version_conflict": "the job version cannot be restored as it is (its project or an upstream job is gone)",
    "already_member": "the address is already a member's (of this organization)",
    "already_invited": "the address has a pending invitation: resend or revoke it",
    "invitation_closed": "the invitation was accepted or revoked",
    "too_many_invitations": "too many invitation e-mails this hour, by the organization or to the address (429, Retry-After)",
    "last_owner": "an organization keeps at least one owner",
    "idempotency_key_reused": "the Idempotency-Key was used with a different body",
    "invalid_idempotency_key": "the Idempotency-Key header is empty, too long or not printable",
    "unsupported_media_type": "send application/json",
    "not_acceptable": "the Accept header names no type the operation answers (406); accept application/json",
    "throttled": "too many requests; see Retry-After and X-RateLimit-*",
    "archive_storage_unavailable": "archive storage is not configured or did not answer (503); try again later",
}

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "fields"],
            "properties": {
                "code": {
                    "type": "string",
                    "description": "Stable, machine-readable. Codes used:\n"
                    + "\n".join(f"- `{code}`: {meaning}" for code, meaning in ERROR_CODES.items()),
                },
                "message": {"type": "string", "description": "For a person."},
                "fields": {
                    "type": "object",
                    "additionalProperties": {"type": "array", "items": {"type": "string"}},
                    "description": "Dotted input paths (e.g. `schedule.expression`) to their messages.",
                },
                "limit": {"type": "string", "description": "plan_limit only: the limit reached."},
                "plan": {"type": "string", "nullable": True,
                         "description": "plan_limit only: the cheapest plan that allows it, if any."},
                "reason": {"type": "string", "description": "plan_limit only: the underlying check."},
                "choices": {
                    "type": "array", "description": "project_required only: the projects you may give "
                                                    "(by name, at most 20).",
                    "items": {"type": "object", "required": ["id", "name"],
                              "properties": {"id": {"type": "string"}, "name": {"type": "string"}}},
                },
            },
        }
    },
    "example": {"error": {"code": "invalid_cron", "message": "schedule.expression: ...",
                          "fields": {"schedule.expression": ["..."]}}},
}

_ALWAYS = {
    "400": "Invalid input (see `error.code` and `error.fields`).",
    "401": "Missing or invalid credentials (`not_authenticated`, `invalid_api_key`).",
    "403": "The role or key scope does not allow this (`permission_denied`).",
    "404": "Not found in your organization (`not_found`).",
    "406": "The Accept header names no type this operation answers (`not_acceptable`).",
    "414": "The URL is longer than the server accepts (`url_too_long`).",
    "431": "The request headers are larger than the server accepts (`headers_too_large`).",
    "429": "Rate limited (`throttled`); see Retry-After and X-RateLimit-* headers.",
}
_MUTATIONS = {
    "413": "The body is larger than the server accepts (`request_too_large`).",
    "415": "The body is not JSON (`unsupported_media_type`).",
    "402": "The plan does not allow this (`plan_limit`).",
    "409": "Conflicts with the current state (`conflict` and specific codes).",
}


RATE_LIMIT_HEADERS = {
    "X-RateLimit-Limit": {"schema": {"type": "integer"}, "description": "Requests per minute of your plan."},
    "X-RateLimit-Remaining": {"schema": {"type": "integer"}, "description": "Requests left in this minute."},
    "X-RateLimit-Reset": {"schema": {"type": "integer"}, "description": "When the minute ends (Unix time)."},
}
RETRY_AFTER = {"Retry-After": {"schema": {"type": "integer"}, "description": "Seconds to wait."}}


def error_response(code, description):
    response = {"description": description,
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    if code == "429":
        response["headers"] = {**RATE_LIMIT_HEADERS, **RETRY_AFTER}
    return response


def error_openapi_response(description):
    """An error response for ``extend_schema(responses=...)`` (which wants an
    OpenApiResponse, not a response object like error_response's)."""
    return OpenApiResponse(response={"$ref": "#/components/schemas/Error"}, description=description)


class ApiAutoSchema(AutoSchema):
    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        errors = dict(_ALWAYS)
        if self.method not in ("GET", "HEAD", "OPTIONS"):
            errors.update(_MUTATIONS)
        for code, description in errors.items():
            responses.setdefault(code, error_response(code, description))
        return responses

    def _get_response_headers_for_code(self, status_code, direction="response"):
        headers = super()._get_response_headers_for_code(status_code, direction)
        if str(status_code).startswith("2"):
            headers = {**RATE_LIMIT_HEADERS, **headers}
        return headers


class ApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "apps.api.authentication.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key: `Authorization: Bearer csk_live_...`. Read keys may only read.",
        }


def add_error_component(result, generator, request, public):
    """drf-spectacular post-processing hook: the Error schema every error response names."""
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    return result


def nullable_references(result, generator, request, public):
    """drf-spectacular post-processing hook: a nullable reference as OpenAPI 3.0.3 means it.
    drf-spectacular writes ``{"allOf": [{"$ref": X}], "nullable": true}``, but 3.0.3 lets
    ``nullable`` widen only a ``type`` in the same object, so strict validators (openapi-core)
    refused every null such a field answers. Written instead: X or null."""

    def rewrite(node):
        if isinstance(node, dict):
            if node.get("nullable") and len(node.get("allOf", ())) == 1:
                reference = node.pop("allOf")[0]
                del node["nullable"]
                node["oneOf"] = [reference, {"type": "object", "nullable": True, "enum": [None]}]
            for value in node.values():
                rewrite(value)
        elif isinstance(node, list):
            for value in node:
                rewrite(value)

    rewrite(result)
    return result
