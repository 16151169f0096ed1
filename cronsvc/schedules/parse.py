"""The API shape of a schedule (a JSON object) <-> the schedule values.

parse_schedule checks shape, types, the cron syntax and the timezone name; the
checks that depend on the plan, the clock or the window live in validate.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone

from .cron import compile_cron
from .errors import ScheduleError
from .localtime import load_zone
from .model import CronSchedule, IntervalSchedule, OnceSchedule, Schedule

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_INTERVAL_SECONDS = 366 * 86400
_KEYS = {
    "cron": ("type", "expression", "timezone"),
    "interval": ("type", "seconds", "anchor", "timezone"),
    "once": ("type", "at", "timezone"),
}


def parse_schedule(
    data: object,
    *,
    default_timezone: str = "UTC",
    anchor: datetime | None = None,
) -> Schedule:
    """Build a schedule from its API shape, or raise ScheduleError.

    Interval schedules take their anchor from ``data["anchor"]`` if present, else
    from ``anchor`` (the job's start_at or creation time), else the Unix epoch,
    which puts runs on round clock times (every 300 s: :00, :05, ...).
    """
    kind = _kind(data)
    _refuse_unknown_keys(data, kind)
    zone = data.get("timezone")
    zone = default_timezone if zone is None else zone
    load_zone(zone, "schedule.timezone")
    if kind == "cron":
        return CronSchedule(_expression(data), zone)
    if kind == "interval":
        return IntervalSchedule(_seconds(data), _anchor(data, anchor), zone)
    return OnceSchedule(_instant(data.get("at"), "schedule.at"), zone)


def schedule_to_dict(schedule: Schedule) -> dict:
    """The API shape of a schedule; datetimes as ISO 8601 in UTC with 'Z'."""
    if isinstance(schedule, CronSchedule):
        return {"type": "cron", "expression": schedule.expression, "timezone": schedule.timezone}
    if isinstance(schedule, IntervalSchedule):
        return {
            "type": "interval",
            "seconds": schedule.seconds,
            "anchor": format_instant(schedule.anchor),
            "timezone": schedule.timezone,
        }
    if isinstance(schedule, OnceSchedule):
        return {"type": "once", "at": format_instant(schedule.at), "timezone": schedule.timezone}
    raise TypeError(f"not a schedule: {schedule!r}")


def format_instant(value: datetime) -> str:
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _kind(data: object) -> str:
    if not isinstance(data, Mapping):
        raise ScheduleError(
            "invalid_schedule",
            "schedule",
            'schedule: give an object such as {"type": "cron", "expression": "0 3 * * *"}.',
        )
    kind = data.get("type")
    if not isinstance(kind, str) or kind not in _KEYS:  # {} or [] are unhashable
        raise ScheduleError(
            "invalid_schedule",
            "schedule.type",
            f"schedule.type: give one of {', '.join(repr(k) for k in _KEYS)}.",
        )
    return kind


def _refuse_unknown_keys(data: Mapping, kind: str) -> None:
    for key in data:
        if key not in _KEYS[kind]:
            raise ScheduleError(
                "invalid_schedule",
                f"schedule.{key}",
                f"schedule.{key}: not a field of a {kind} schedule; allowed: {', '.join(_KEYS[kind])}.",
            )


def _expression(data: Mapping) -> str:
    expression = data.get("expression")
    if not isinstance(expression, str) or not expression.strip():
        raise ScheduleError(
            "invalid_schedule",
            "schedule.expression",
            "schedule.expression: give a cron expression such as '0 3 * * *' or '@daily'.",
        )
    compile_cron(expression, "schedule.expression")  # before normalising: it refuses non-ASCII spaces
    return " ".join(expression.split())


def _seconds(data: Mapping) -> int:
    seconds = data.get("seconds")
    if isinstance(seconds, float) and seconds.is_integer():
        seconds = int(seconds)
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 1 <= seconds <= MAX_INTERVAL_SECONDS:
        raise ScheduleError(
            "invalid_schedule",
            "schedule.seconds",
            f"schedule.seconds: give a whole number of seconds from 1 to {MAX_INTERVAL_SECONDS} (366 days).",
        )
    return seconds


def _anchor(data: Mapping, fallback: datetime | None) -> datetime:
    if data.get("anchor") is not None:
        return _instant(data["anchor"], "schedule.anchor")
    if fallback is not None:
        return _instant(fallback, "anchor")
    return EPOCH


def _instant(value: object, field: str) -> datetime:
    """An aware datetime (or ISO 8601 string with offset or Z) as UTC; naive is refused."""
    parsed = value
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value.strip())
        except ValueError:
            parsed = None
    if not isinstance(parsed, datetime) or parsed.tzinfo is None or parsed.utcoffset() is None:
        raise ScheduleError(
            "invalid_schedule",
            field,
            f"{field}: give an ISO 8601 date-time with an offset or Z, e.g. '2027-01-01T00:00:00Z'.",
        )
    return parsed.astimezone(UTC)
