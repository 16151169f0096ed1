"""Schedules in words, for pages and API responses."""

from __future__ import annotations

from datetime import timezone
from functools import lru_cache

from cron_descriptor import ExpressionDescriptor, Options

from .cron import compile_cron
from .localtime import load_zone
from .model import CronSchedule, IntervalSchedule, OnceSchedule, Schedule

UTC = timezone.utc
_UNITS = ((86400, "day"), (3600, "hour"), (60, "minute"), (1, "second"))


def describe(schedule: Schedule) -> str:
    """E.g. "At 03:00, Monday through Friday (Europe/Berlin)", "Every 5 minutes"."""
    if isinstance(schedule, CronSchedule):
        return f"{_describe_cron(schedule.expression)} ({schedule.timezone})"
    if isinstance(schedule, IntervalSchedule):
        return f"Every {format_duration(schedule.seconds, singular_bare=True)}"
    if isinstance(schedule, OnceSchedule):
        local = schedule.at.astimezone(load_zone(schedule.timezone))
        return f"Once at {local:%Y-%m-%d %H:%M} ({schedule.timezone})"
    raise TypeError(f"not a schedule: {schedule!r}")


def format_duration(seconds: int, *, singular_bare: bool = False) -> str:
    """'5 minutes', '90 seconds', '2 hours'; with singular_bare, 1 hour is just 'hour'."""
    for size, unit in _UNITS:
        if seconds % size == 0:
            count = seconds // size
            if count == 1:
                return unit if singular_bare else f"1 {unit}"
            return f"{count} {unit}s"
    raise AssertionError("unreachable: every whole number is a multiple of 1")


def _describe_cron(expression: str) -> str:
    minute, hour, dom, month, dow = compile_cron(expression).fields
    if dom.startswith("*") or dow.startswith("*"):
        return _descriptor(" ".join((minute, hour, dom, month, dow)))
    # cron-descriptor reads "1,15 * MON" as "and"; Vixie cron fires on either.
    by_date = _descriptor(" ".join((minute, hour, dom, month, "*")))
    by_weekday = _descriptor(f"0 0 * * {dow}").removeprefix("At 00:00, ").removeprefix("only ")
    return f"{by_date}, or {by_weekday}"


@lru_cache(maxsize=4096)
def _descriptor(expression: str) -> str:
    # Memoised: cron-descriptor parses its gettext catalogue on every call, which was the
    # largest single cost of a 50-job API page (bench/README.md, "Figures behind the code").
    options = Options()
    options.use_24hour_time_format = True
    options.locale_code = "en_US"
    try:
        return ExpressionDescriptor(expression, options).get_description()
    except Exception:  # the library raises assorted types; fall back to the expression itself
        return f"Cron '{expression}'"
