"""Checks that depend on the plan, the clock and the job's window (parse.py checks the shape)."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache

from .cron import compile_cron
from .cron_gaps import cron_min_gap
from .describe import format_duration
from .errors import ScheduleError
from .localtime import timeline
from .model import CronSchedule, IntervalSchedule, OnceSchedule, Schedule
from .parse import format_instant
from .runs import EPOCH, next_run, require_aware

_SECOND = timedelta(seconds=1)


def validate_schedule(
    schedule: Schedule,
    *,
    now: datetime,
    min_interval_seconds: int,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
    horizon_days: int = 35,
) -> None:
    """Raise ScheduleError if the job could never run, or would run more often than the plan allows."""
    require_aware(now, "now")
    _check_window(start_at, end_at)
    _check_can_ever_fire(schedule)
    if isinstance(schedule, OnceSchedule) and schedule.at <= now:
        raise ScheduleError(
            "in_the_past",
            "schedule.at",
            f"schedule.at: {format_instant(schedule.at)} is not in the future; pick a later time.",
        )
    if next_run(schedule, now, start_at=start_at, end_at=end_at) is None:
        _raise_empty_window(start_at, end_at)
    _check_frequency(schedule, now, min_interval_seconds, start_at, end_at, horizon_days)


def min_gap_seconds(schedule: Schedule, *, after: datetime, horizon_days: int = 35) -> int | None:
    """Smallest real gap between consecutive runs in the ``horizon_days`` after ``after``.

    None when fewer than two runs fall in the horizon (always for a once schedule).
    """
    require_aware(after, "after")
    return _min_gap(schedule, after, after + timedelta(days=horizon_days))


def _min_gap(schedule: Schedule, after: datetime, until: datetime) -> int | None:
    if isinstance(schedule, IntervalSchedule):
        return schedule.seconds
    if isinstance(schedule, OnceSchedule):
        return None
    return _cron_min_gap(schedule.expression, schedule.timezone, _ts(after), _ts(until))


@lru_cache(maxsize=256)
def _cron_min_gap(expression: str, zone: str, after: int, until: int) -> int | None:
    # Cached: saving a job checks the same schedule against the platform's floor and
    # against the plan (and the cheapest plan that allows it), all at the same instant.
    return cron_min_gap(compile_cron(expression), timeline(zone), after, until)


def _ts(value: datetime) -> int:
    return (value - EPOCH) // _SECOND


def _check_window(start_at: datetime | None, end_at: datetime | None) -> None:
    if start_at is not None and end_at is not None and end_at <= start_at:
        raise ScheduleError(
            "invalid_window",
            "end_at",
            f"end_at: {format_instant(end_at)} is not after start_at {format_instant(start_at)}; "
            "give an end_at later than start_at, or none.",
        )


def _check_can_ever_fire(schedule: Schedule) -> None:
    if not isinstance(schedule, CronSchedule):
        return
    timeline(schedule.timezone)  # unknown timezone -> ScheduleError
    if not compile_cron(schedule.expression).can_fire:
        raise ScheduleError(
            "never_fires",
            "schedule.expression",
            f"schedule.expression: '{schedule.expression}' matches no date in any year "
            "(e.g. 30 February); pick a day that exists.",
        )


def _raise_empty_window(start_at: datetime | None, end_at: datetime | None) -> None:
    field = "end_at" if end_at is not None else "start_at"
    start = format_instant(start_at) if start_at else "now"
    end = format_instant(end_at) if end_at else "no end"
    raise ScheduleError(
        "never_fires",
        field,
        f"{field}: no run falls in the window from {start} to {end}; widen the window or change the schedule.",
    )


def _check_frequency(
    schedule: Schedule,
    now: datetime,
    min_interval_seconds: int,
    start_at: datetime | None,
    end_at: datetime | None,
    horizon_days: int,
) -> None:
    if isinstance(schedule, OnceSchedule):
        return
    after = max(now, start_at - _SECOND) if start_at is not None else now  # count a run at start_at
    until = after + timedelta(days=horizon_days)
    if end_at is not None:
        until = min(until, end_at)
    gap = _min_gap(schedule, after, until)
    if gap is None or gap >= min_interval_seconds:
        return
    field = "schedule.seconds" if isinstance(schedule, IntervalSchedule) else "schedule.expression"
    what = "runs every" if isinstance(schedule, IntervalSchedule) else "would run as often as every"
    raise ScheduleError(
        "interval_too_short",
        field,
        f"{field}: the schedule {what} {format_duration(gap)} (smallest gap between runs over the next "
        f"{horizon_days} days), but your plan allows at most one run every {format_duration(min_interval_seconds)}; "
        "choose a less frequent schedule or upgrade the plan.",
    )
