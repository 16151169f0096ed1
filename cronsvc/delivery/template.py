"""Request body templates: ``{{ dotted.name }}`` placeholders and nothing else.

No expressions, filters, attribute access or eval: a placeholder is a key looked up in a
flat dict of dotted names (``job.id``, later ``upstream.<name>.status``), so adding a
variable is adding a key.

Values are escaped for the body format:

- ``raw``:  the value as text.
- ``form``: the value percent-encoded (``quote_plus``), safe as a key or a value.
- ``json``: inside a string literal, the JSON-escaped text without the quotes
  (``"Hi {{ job.name }}"``); anywhere else, the JSON encoding of the value
  (``{"attempt": {{ attempt }}}`` gives a number, a string comes out quoted).
  Either way a value can never break out of its place in the document.

Any ``{{ ... }}`` whose content is not a dotted name is an error, not literal text, so a
typo such as ``{{ job.name | upper }}`` is reported instead of sent.

Workflows add the upstream executions' results: ``upstream.<key>.status`` (the HTTP status
code), ``.outcome`` (the execution's status), ``.body`` (the response body) and
``.json.<path>`` (a value inside the JSON response; a number in the path indexes a list).
``<key>`` is the upstream job's name with every character other than a letter, a digit,
``_`` or ``-`` replaced by ``_`` (``upstream_key``). Every value is capped at
UPSTREAM_VALUE_MAX_CHARS characters; an upstream that did not run, or a path that is not
in its response, reads as null (empty text in raw and form bodies).
"""

from __future__ import annotations

import json
import re
from collections.abc import Container, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any
from urllib.parse import quote_plus

from .errors import InvalidRequest

UPSTREAM_VALUE_MAX_CHARS = 16 * 1024
UPSTREAM_FIELDS = frozenset({"status", "outcome", "body"})

BODY_FORMATS = frozenset({"raw", "json", "form"})

_PLACEHOLDER = re.compile(r"\{\{(.*?)\}\}", re.DOTALL)
_NAME = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)\s*")

# A compiled template: (literal text, variable name or None, placeholder is inside a JSON string)
Segment = tuple[str, "str | None", bool]


@lru_cache(maxsize=512)
def parse_template(template: str, body_format: str) -> tuple[Segment, ...]:
    """Split a template into segments; cached because workers render the same bodies."""
    segments: list[Segment] = []
    in_string = escaped = False
    position = 0
    for match in _PLACEHOLDER.finditer(template):
        literal = template[position:match.start()]
        if body_format == "json":
            in_string, escaped = _scan_json(literal, in_string, escaped)
        segments.append((literal, _placeholder_name(match.group(1)), in_string))
        position = match.end()
    segments.append((template[position:], None, False))
    return tuple(segments)


def _placeholder_name(content: str) -> str:
    match = _NAME.fullmatch(content)
    if match is None:
        raise InvalidRequest(
            "invalid_placeholder", "body",
            f"{{{{{content}}}}} is not a placeholder; use {{{{ name }}}} with a dotted name",
        )
    return match.group(1)


def _scan_json(text: str, in_string: bool, escaped: bool) -> tuple[bool, bool]:
    """Track whether the end of ``text`` is inside a JSON string literal."""
    for char in text:
        if escaped:
            escaped = False
        elif in_string and char == "\\":
            escaped = True
        elif char == '"':
            in_string = not in_string
    return in_string, escaped


def template_variables(template: str) -> list[str]:
    """The variable names a template uses, in order (raises on a malformed placeholder)."""
    return [name for _, name, _ in parse_template(template, "raw") if name is not None]


def check_template(template: str, body_format: str, known: Container[str]) -> None:
    """Refuse unknown variables and, for JSON, a template that does not render to JSON."""
    segments = parse_template(template, body_format)
    for _, name, _ in segments:
        if name is not None and name not in known and not is_upstream_variable(name):
            raise InvalidRequest("unknown_variable", "body", f"unknown variable {{{{ {name} }}}}")
    if body_format == "json":
        sample = {name: "sample" for _, name, _ in segments if name is not None}
        try:
            json.loads(render_body(template, sample, "json"))
        except ValueError as exc:
            raise InvalidRequest("invalid_json", "body", f"the body is not valid JSON: {exc}") from exc


def render_body(template: str, variables: Mapping[str, Any], body_format: str = "raw") -> str:
    """Substitute every placeholder, escaped for ``body_format``."""
    parts = []
    for literal, name, in_string in parse_template(template, body_format):
        parts.append(literal)
        if name is not None:
            if name in variables:
                value = variables[name]
            elif is_upstream_variable(name):
                value = None  # no upstream result given: the upstream did not run
            else:
                raise InvalidRequest("unknown_variable", "body", f"unknown variable {{{{ {name} }}}}")
            parts.append(_escape(value, body_format, in_string))
    return "".join(parts)


def _escape(value: Any, body_format: str, in_json_string: bool) -> str:
    if body_format == "json":
        if in_json_string:
            return json.dumps(as_text(value), ensure_ascii=False)[1:-1]
        return json.dumps(_json_value(value), ensure_ascii=False)
    if body_format == "form":
        return quote_plus(as_text(value))
    return as_text(value)


def _json_value(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str, list, dict)):
        return value  # lists and objects come from an upstream's JSON response
    return as_text(value)


def as_text(value: Any) -> str:
    """How a variable reads as text: ISO 8601 UTC for datetimes, JSON spelling for others."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return iso_utc(value)
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def iso_utc(moment: datetime) -> str:
    """``2024-05-01T12:00:00Z``; a naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


# --- workflows: the upstream executions' results


def upstream_key(job_name: str) -> str:
    """How a job's name is spelled in ``{{ upstream.<key>.… }}``."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", job_name)


def is_upstream_variable(name: str) -> bool:
    """``upstream.<key>.status|outcome|body`` or ``upstream.<key>.json[.<path>]``."""
    parts = name.split(".")
    if len(parts) < 3 or parts[0] != "upstream":
        return False
    return (len(parts) == 3 and parts[2] in UPSTREAM_FIELDS) or parts[2] == "json"


@dataclass(frozen=True)
class UpstreamResult:
    """What a downstream template may read of one upstream execution."""

    outcome: str
    status: int | None
    body: str


class WorkflowVariables(Mapping):
    """The standard variables plus ``upstream.*`` values, computed when a template asks."""

    def __init__(self, base: Mapping[str, Any], upstream: Mapping[str, UpstreamResult]):
        self._base = base
        self._upstream = upstream
        self._parsed: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name in self._base:
            return self._base[name]
        if not is_upstream_variable(name):
            raise KeyError(name)
        _, key, field, *path = name.split(".")
        result = self._upstream.get(key)
        if result is None:
            return None
        if field == "status":
            return result.status
        if field == "outcome":
            return result.outcome
        if field == "body":
            return result.body[:UPSTREAM_VALUE_MAX_CHARS]
        return _capped(_walk(self._json(key, result), path))

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._base or is_upstream_variable(name))

    def __iter__(self):
        return iter(self._base)

    def __len__(self) -> int:
        return len(self._base)

    def _json(self, key: str, result: UpstreamResult) -> Any:
        if key not in self._parsed:
            try:
                self._parsed[key] = json.loads(result.body)
            except ValueError:
                self._parsed[key] = None  # not JSON: every path reads as null
        return self._parsed[key]


def _walk(value: Any, path: list[str]) -> Any:
    for step in path:
        if isinstance(value, dict):
            value = value.get(step)
        elif isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return None
    return value


def _capped(value: Any) -> Any:
    """A value whose text is longer than the cap comes out as its text, cut at the cap."""
    if isinstance(value, str):
        return value[:UPSTREAM_VALUE_MAX_CHARS]
    if isinstance(value, (list, dict)):
        text = as_text(value)
        return value if len(text) <= UPSTREAM_VALUE_MAX_CHARS else text[:UPSTREAM_VALUE_MAX_CHARS]
    return value
