"""Execution windows and blackout dates: when a job's occurrences may run.

A job may name weekly windows (days of the week and a local time range, e.g. Mon-Fri
08:00-18:00, or an overnight 22:00-06:00) and blackout dates (whole local days, e.g.
2027-12-24..26), both in the job's timezone. An instant is *open* when its wall-clock
time in that zone falls in some window (or the job names no window) and its local date
in no blackout.

Comparing wall-clock times makes DST exact without special cases: on a spring-forward
day a 01:00-03:00 window in New York is open from 01:00 EST until the clocks jump to
03:00 EDT (one real hour); on a fall-back day the repeated hour is open both times.

Pure functions over aware datetimes: no clock is read (the caller passes the instants).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone

from .localtime import load_zone, timeline

UTC = timezone.utc
DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_DAY = timedelta(days=1)
_MIDNIGHT = time(0, 0)


@dataclass(frozen=True, slots=True)
class Window:
    """Open from ``start`` on each of ``days`` (0 = Monday) until ``end`` that day, or,
    when ``overnight``, until ``end`` the next day (end == start: 24 hours)."""

    days: frozenset[int]
    start: time
    end: time
    overnight: bool = False

    def is_open(self, weekday: int, clock: time) -> bool:
        if not self.overnight:
            return weekday in self.days and self.start <= clock < self.end
        return (weekday in self.days and clock >= self.start) or ((weekday - 1) % 7 in self.days and clock < self.end)


@dataclass(frozen=True, slots=True)
class Blackout:
    """Local dates ``first`` to ``last``, both included, on which nothing runs."""

    first: date
    last: date


@dataclass(frozen=True, slots=True)
class RunWindows:
    """A job's windows and blackouts in its timezone. No windows: open every day."""

    windows: tuple[Window, ...]
    blackouts: tuple[Blackout, ...]
    timezone: str = "UTC"


def is_open(rules: RunWindows, instant: datetime) -> bool:
    """Whether a run may start at ``instant`` (aware)."""
    wall = instant.astimezone(load_zone(rules.timezone))
    return _open_at_wall(rules, wall)


def next_opening(rules: RunWindows, instant: datetime) -> datetime | None:
    """The first instant at or after ``instant`` at which a run may start (``instant``
    itself when open), in UTC; None when no window opens (no weekday is ever open)."""
    if is_open(rules, instant):
        return instant.astimezone(UTC)
    zone = load_zone(rules.timezone)
    day = instant.astimezone(zone).date()
    # Weekly windows repeat within 8 days of any day no blackout covers, so the search
    # ends a week after the last blackout (or after ``instant``).
    last_day = max([day, *(b.last for b in rules.blackouts)]) + 8 * _DAY
    while day <= last_day:
        blackout = _blackout_on(rules, day)
        if blackout is not None:
            day = blackout.last + _DAY
            continue
        for candidate in _candidates(rules, zone, day):
            if candidate > instant and _open_at_wall(rules, candidate.astimezone(zone)):
                return candidate
        day += _DAY
    return None


def _open_at_wall(rules: RunWindows, wall: datetime) -> bool:
    local_date = wall.date()
    for blackout in rules.blackouts:
        if blackout.first <= local_date <= blackout.last:
            return False
    if not rules.windows:
        return True
    weekday, clock = wall.weekday(), wall.time()
    return any(window.is_open(weekday, clock) for window in rules.windows)


def _blackout_on(rules: RunWindows, day: date) -> Blackout | None:
    for blackout in rules.blackouts:
        if blackout.first <= day <= blackout.last:
            return blackout
    return None


def _candidates(rules: RunWindows, zone, day: date) -> list[datetime]:
    """Every instant of local ``day`` at which the open state can switch on: its
    midnight (a blackout ends, an overnight window carries over), each window's start,
    and each UTC offset change (the clocks may jump into a window), sorted."""
    weekday = day.weekday()
    walls = [_MIDNIGHT, *(w.start for w in rules.windows if weekday in w.days)]
    found = {instant for clock in walls for instant in wall_instants(zone, datetime.combine(day, clock))}
    day_start = _earliest(zone, day)
    day_end = _earliest(zone, day + _DAY)
    found.update(_transitions(rules.timezone, day_start, day_end))
    return sorted(found)


def wall_instants(zone, wall: datetime) -> list[datetime]:
    """The UTC instants whose local time in ``zone`` is the naive ``wall``: one, two in a
    fall-back's repeated hour, none in a spring-forward gap."""
    instants = []
    for fold in (0, 1):
        instant = wall.replace(tzinfo=zone, fold=fold).astimezone(UTC)
        if instant.astimezone(zone).replace(tzinfo=None) == wall and instant not in instants:
            instants.append(instant)
    return instants


def _earliest(zone, day: date) -> datetime:
    """The first instant of local ``day`` (its midnight, or the end of a gap over it)."""
    wall = datetime.combine(day, _MIDNIGHT)
    instants = wall_instants(zone, wall)
    if instants:
        return instants[0]
    return wall.replace(tzinfo=zone, fold=1).astimezone(UTC)  # in the gap: before the jump


def _transitions(zone_name: str, start: datetime, end: datetime) -> list[datetime]:
    """UTC offset changes of the zone in [start, end)."""
    line = timeline(zone_name)
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    ts, limit = int((start - epoch).total_seconds()) - 1, int((end - epoch).total_seconds()) - 1
    found = []
    while (ts := line.next_transition(ts, limit)) is not None:
        found.append(datetime.fromtimestamp(ts, UTC))
    return found
