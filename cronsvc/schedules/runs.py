"""next_run / next_runs: the one entry point the scheduler calls for every dispatched run."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from functools import lru_cache

from .cron import compile_cron
from .cron_runs import next_cron_ts
from .interval import next_interval_run, next_once_run
from .localtime import timeline
from .model import CronSchedule, IntervalSchedule, OnceSchedule, Schedule

UTC = timezone.utc
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_TICK = timedelta(microseconds=1)


SUPPORTED_FROM = datetime(1970, 1, 1, tzinfo=timezone.utc)
SUPPORTED_UNTIL = datetime(9000, 1, 1, tzinfo=timezone.utc)


def next_run(
    schedule: Schedule,
    after: datetime,
    *,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> datetime | None:
    """First run strictly after ``after`` inside the window [start_at, end_at], in UTC; None if none."""
    require_aware(after, "after")
    if start_at is not None and start_at > after:
        after = start_at - _TICK  # a run exactly at start_at is allowed
    if after >= SUPPORTED_UNTIL:
        return None
    # Timezone rules (and datetime itself) run out near years 1 and 9999: the engine
    # answers for runs from 1970 on, which covers every schedule a job can have.
    after = max(after, SUPPORTED_FROM - _TICK)
    run = _next_unbounded(schedule, after)
    if run is None or (end_at is not None and run > end_at):
        return None
    return run


def next_runs(
    schedule: Schedule,
    after: datetime,
    count: int,
    *,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> list[datetime]:
    """Up to ``count`` consecutive runs after ``after`` (fewer when the schedule or window ends)."""
    runs: list[datetime] = []
    while len(runs) < count:
        run = next_run(schedule, after, start_at=start_at, end_at=end_at)
        if run is None:
            break
        runs.append(run)
        after = run
    return runs


def require_aware(value: datetime, name: str) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got {value!r}")


def _next_unbounded(schedule: Schedule, after: datetime) -> datetime | None:
    if isinstance(schedule, CronSchedule):
        return _next_cron(schedule.expression, schedule.timezone, after)
    if isinstance(schedule, IntervalSchedule):
        return next_interval_run(schedule, after)
    if isinstance(schedule, OnceSchedule):
        return next_once_run(schedule, after)
    raise TypeError(f"not a schedule: {schedule!r}")


def _next_cron(expression: str, zone: str, after: datetime) -> datetime | None:
    ts = (after - EPOCH) // _SECOND
    # Runs fall on whole minutes, so every `after` in one minute shares an answer;
    # memoise per minute and fall back to the exact search if a run lies inside it.
    run = _next_cron_after_minute(expression, zone, ts - ts % 60)
    if run is not None and run <= ts:
        run = next_cron_ts(compile_cron(expression), timeline(zone), ts)
    return None if run is None else datetime.fromtimestamp(run, UTC)


@lru_cache(maxsize=65536)
def _next_cron_after_minute(expression: str, zone: str, minute: int) -> int | None:
    return next_cron_ts(compile_cron(expression), timeline(zone), minute)
