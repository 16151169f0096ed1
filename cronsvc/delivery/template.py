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
"""

from __future__ import annotations

import json
import re
from collections.abc import Container, Mapping
from datetime import datetime, timezone
from functools import lru_cache
from typing import Any
from urllib.parse import quote_plus

from .errors import InvalidRequest

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
        if name is not None and name not in known:
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
            if name not in variables:
                raise InvalidRequest("unknown_variable", "body", f"unknown variable {{{{ {name} }}}}")
            parts.append(_escape(variables[name], body_format, in_string))
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
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return as_text(value)


def as_text(value: Any) -> str:
    """How a variable reads as text: ISO 8601 UTC for datetimes, JSON spelling for others."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        return iso_utc(value)
    return str(value)


def iso_utc(moment: datetime) -> str:
    """``2024-05-01T12:00:00Z``; a naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
