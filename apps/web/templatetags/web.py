"""Template filters of the customers' pages: times in a job's timezone, relative times,
durations, error lookups."""

import json
from datetime import datetime
from zoneinfo import ZoneInfo

from django import template
from django.templatetags.tz import do_timezone
from django.utils import timezone

from apps.jobs import forms as job_forms

register = template.Library()


@register.filter
def get(mapping, key):
    """``errors|get:"url"``: a dict lookup with a variable or dotted key."""
    if not mapping:
        return None
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def in_tz(value, zone):
    """A datetime in the IANA timezone ``zone``."""
    if not isinstance(value, datetime):
        return value
    try:
        ZoneInfo(zone or "UTC")
    except Exception:
        zone = "UTC"
    # Django's own |timezone filter: its result is not converted back to the current
    # timezone by |date, unlike a plain astimezone().
    return do_timezone(value, zone or "UTC")


@register.filter
def relative(value, now=None):
    """'in 4 min', '3 h ago', 'just now'."""
    if not isinstance(value, datetime):
        return ""
    now = now if isinstance(now, datetime) else timezone.now()
    delta = value - now
    seconds = int(delta.total_seconds())
    future = seconds > 0
    seconds = abs(seconds)
    if seconds < 45:
        return "in a few seconds" if future else "just now"
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if seconds >= size or unit == "min":
            amount = max(1, round(seconds / size))
            text = f"{amount} {unit}"
            return f"in {text}" if future else f"{text} ago"
    return ""


@register.filter
def duration(ms):
    """Milliseconds for a person: '85 ms', '1.2 s', '2 min 5 s'."""
    if ms is None or ms == "":
        return "—"
    ms = int(ms)
    if ms < 1000:
        return f"{ms} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(ms // 1000, 60)
    return f"{minutes} min {seconds} s"


@register.filter
def pretty_body(text):
    """JSON bodies indented; anything else as is."""
    if not text:
        return ""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (ValueError, TypeError):
        return text


@register.filter
def seconds_text(seconds):
    from cronsvc.schedules.describe import format_duration

    try:
        return format_duration(int(seconds))
    except (TypeError, ValueError):
        return seconds


@register.simple_tag(takes_context=True)
def query(context, **changes):
    """The current query string with some parameters changed (None or '' removes one)."""
    params = context["request"].GET.copy()
    for key, value in changes.items():
        if value in (None, ""):
            params.pop(key, None)
        else:
            params[key] = value
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"


@register.filter
def status_class(status):
    return {
        "succeeded": "ok", "healthy": "ok", "failed": "bad", "timed_out": "bad", "dead": "bad", "failing": "bad",
        "queued": "pending", "running": "pending", "skipped": "muted", "paused": "muted", "disabled": "warn",
        "expired": "muted", "new": "pending", "up": "ok", "late": "warn", "down": "bad",
    }.get(str(status), "muted")


@register.filter
def has_any(errors, names):
    """Whether ``errors`` has one for any of the comma-separated field ``names`` (a folded
    section of a form opens when one of its fields has an error)."""
    return any(name in (errors or {}) for name in names.split(","))


@register.filter
def job_field_label(name):
    return job_forms.label_of(name)


@register.filter
def label(status):
    return str(status).replace("_", " ")


@register.inclusion_tag("web/_field.html", takes_context=True)
def field(context, name, label, type="text", help="", choices=None, required=False, **attrs):
    """One labelled form control with its help and its errors (from ``values`` and
    ``errors`` in the context), wired for screen readers (aria-describedby/invalid)."""
    values = context.get("values") or {}
    errors = (context.get("errors") or {}).get(name) or []
    value = values.get(name, "") if hasattr(values, "get") else ""
    if value is None:
        value = ""
    field_id = attrs.pop("id", f"id_{name}")
    described = " ".join(part for part, present in ((f"{field_id}-help", help), (f"{field_id}-error", errors))
                         if present)
    return {
        "name": name, "label": label, "type": type, "help": help, "errors": errors, "id": field_id,
        "value": value, "checked": value in (True, "on", "true", "1"),
        "choices": [(str(k), v) for k, v in (choices or [])], "required": required,
        "attrs": {k.replace("_", "-"): v for k, v in attrs.items()}, "described": described,
    }


@register.inclusion_tag("web/_org_switcher.html", takes_context=True)
def organization_switcher(context):
    request = context["request"]
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {"memberships": [], "current": None}
    from apps.accounts.signin_scope import scope_of
    from apps.api.access import memberships_of

    membership = getattr(request, "membership", None)
    memberships = memberships_of(user, scope_of(request))  # the organizations this log-in reaches
    current = membership.organization_id if membership else (memberships[0].organization_id if memberships else None)
    return {"memberships": memberships, "current": current, "csrf_token": context.get("csrf_token")}
