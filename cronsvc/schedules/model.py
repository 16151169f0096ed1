"""The three kinds of schedule, as plain immutable values."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True, slots=True)
class CronSchedule:
    """A 5-field cron expression (or @macro) evaluated in an IANA timezone."""

    expression: str
    timezone: str = "UTC"


@dataclass(frozen=True, slots=True)
class IntervalSchedule:
    """Runs at ``anchor + k * seconds`` (k = 0, 1, 2, ...): fixed grid, never drifts.

    ``anchor`` is an aware UTC datetime; ``timezone`` only matters for display.
    """

    seconds: int
    anchor: datetime
    timezone: str = "UTC"


@dataclass(frozen=True, slots=True)
class OnceSchedule:
    """Runs once, at ``at`` (aware UTC); ``timezone`` only matters for display."""

    at: datetime
    timezone: str = "UTC"


Schedule = CronSchedule | IntervalSchedule | OnceSchedule
