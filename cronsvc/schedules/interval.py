"""Next run of interval and once schedules: plain datetime arithmetic, exact to the microsecond."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from .model import IntervalSchedule, OnceSchedule

UTC = timezone.utc


def next_interval_run(schedule: IntervalSchedule, after: datetime) -> datetime | None:
    """First ``anchor + k * seconds`` (k >= 0) strictly after ``after``.

    Computed from the anchor every time, never from the previous run, so a late or
    skipped dispatch cannot shift the grid.
    """
    anchor = schedule.anchor
    if after < anchor:
        return anchor.astimezone(UTC)
    step = timedelta(seconds=schedule.seconds)
    periods = (after - anchor) // step + 1
    try:
        return (anchor + periods * step).astimezone(UTC)
    except OverflowError:
        return None


def next_once_run(schedule: OnceSchedule, after: datetime) -> datetime | None:
    return schedule.at.astimezone(UTC) if schedule.at > after else None
