"""Cron expressions: parsing into field sets, and searching wall-clock time for a match.

This module knows nothing about timezones: it answers "what is the first wall-clock
minute >= w that the expression matches?", with wall-clock time written as integer
seconds since 1970-01-01 00:00 (wall). cron_runs.py maps that onto UTC instants.

Supported syntax (case-insensitive): lists, ranges, steps (``*/n``, ``a-b/n``,
``a/n``), month and weekday names, ``L``, ``LW`` and ``nW`` in day-of-month,
``nL`` / ``FRIL`` (last weekday n of the month) and ``n#k`` / ``MON#2`` in
day-of-week, 0 or 7 for Sunday, and the @macros. Day-of-month and day-of-week
combine like Vixie cron: if either field starts with ``*`` both must match,
otherwise either may match.
"""

from __future__ import annotations

import calendar
import re
from bisect import bisect_left
from dataclasses import dataclass
from datetime import date
from functools import lru_cache

from .errors import ScheduleError
from .localtime import EPOCH_ORDINAL, MAX_YEAR

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
MONTH_NAMES = {
    name: i + 1 for i, name in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split())
}
DOW_NAMES = {"SUN": 0, "MON": 1, "TUE": 2, "WED": 3, "THU": 4, "FRI": 5, "SAT": 6}
FIELD_LAYOUT = "minute hour day-of-month month day-of-week"


class CronSyntaxError(Exception):
    """Why an expression was refused, phrased for a person (no field path)."""


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    lo: int
    hi: int
    names: dict[str, int] | None = None


MINUTE = _Field("minute", 0, 59)
HOUR = _Field("hour", 0, 23)
DOM = _Field("day-of-month", 1, 31)
MONTH = _Field("month", 1, 12, MONTH_NAMES)
DOW = _Field("day-of-week", 0, 7, DOW_NAMES)

_DOW_LAST = re.compile(r"^([0-7]|[A-Z]{3})L$")
_DOW_NTH = re.compile(r"^([0-7]|[A-Z]{3})#(\d+)$")
_DOM_NEAREST = re.compile(r"^(\d+)W$")


# ---------------------------------------------------------------- parsing


def _value(text: str, field: _Field) -> int:
    if field.names and text in field.names:
        return field.names[text]
    if not text.isdigit():
        raise CronSyntaxError(f"{field.name} value '{text}' is not a number{_names_hint(field)}.")
    value = int(text)
    if not field.lo <= value <= field.hi:
        raise CronSyntaxError(f"{field.name} value {value} is out of range {field.lo}-{field.hi}.")
    return value


def _names_hint(field: _Field) -> str:
    if field is MONTH:
        return " or a month name (JAN-DEC)"
    if field is DOW:
        return " or a day name (SUN-SAT)"
    return ""


def _plain_item(item: str, field: _Field) -> set[int]:
    """One list item without L/W/# forms: ``*``, ``a``, ``a-b``, each optionally ``/step``."""
    body, slash, step_text = item.partition("/")
    if body == "*":
        lo, hi = field.lo, field.hi
    elif "-" in body:
        lo_text, _, hi_text = body.partition("-")
        lo, hi = _value(lo_text, field), _value(hi_text, field)
        if field is DOW and hi == 0 and lo > 0:
            hi = 7  # FRI-SUN: Sunday written as 0 closes the week
        if lo > hi:
            raise CronSyntaxError(f"{field.name} range '{body}' starts after it ends.")
    else:
        lo = _value(body, field)
        hi = field.hi if slash else lo  # 'a/n' means a, a+n, ... up to the field's maximum
    step = 1
    if slash:
        if not step_text.isdigit() or not 1 <= int(step_text) <= field.hi - field.lo + 1:
            raise CronSyntaxError(
                f"{field.name} step '/{step_text}' must be a whole number from 1 to {field.hi - field.lo + 1}."
            )
        step = int(step_text)
    return set(range(lo, hi + 1, step))


def _plain_field(text: str, field: _Field) -> set[int]:
    values: set[int] = set()
    for item in _items(text, field):
        values |= _plain_item(item, field)
    return values


def _items(text: str, field: _Field) -> list[str]:
    items = text.split(",")
    if any(not item for item in items):
        raise CronSyntaxError(f"{field.name} field '{text}' has an empty list item.")
    return items


@dataclass(frozen=True, slots=True)
class DayRule:
    """Which days of a month match: the day-of-month and day-of-week parts, and how they combine."""

    dom_values: frozenset[int]
    dom_last: bool  # L
    dom_last_weekday: bool  # LW
    dom_nearest_weekday: tuple[int, ...]  # 15W
    dow_values: frozenset[int]  # 0 = Sunday
    dow_last: tuple[int, ...]  # 5L: last Friday
    dow_nth: tuple[tuple[int, int], ...]  # (1, 2): second Monday
    both_required: bool  # Vixie: AND if either field starts with '*', else OR

    def days(self, year: int, month: int) -> tuple[int, ...]:
        """The matching days of ``month`` in ``year``, ascending."""
        first_weekday, ndays = calendar.monthrange(year, month)
        first_dow = (first_weekday + 1) % 7  # cron numbering: 0 = Sunday
        dom = self._dom_days(year, month, ndays)
        dow = self._dow_days(first_dow, ndays)
        chosen = dom & dow if self.both_required else dom | dow
        return tuple(sorted(chosen))

    def _dom_days(self, year: int, month: int, ndays: int) -> set[int]:
        days = {d for d in self.dom_values if d <= ndays}
        if self.dom_last:
            days.add(ndays)
        if self.dom_last_weekday:
            days.add(_nearest_weekday(year, month, ndays, ndays))
        for wanted in self.dom_nearest_weekday:
            if wanted <= ndays:
                days.add(_nearest_weekday(year, month, wanted, ndays))
        return days

    def _dow_days(self, first_dow: int, ndays: int) -> set[int]:
        days = {d for d in range(1, ndays + 1) if (first_dow + d - 1) % 7 in self.dow_values}
        for weekday in self.dow_last:
            first = 1 + (weekday - first_dow) % 7
            days.add(first + 7 * ((ndays - first) // 7))
        for weekday, nth in self.dow_nth:
            day = 1 + (weekday - first_dow) % 7 + 7 * (nth - 1)
            if day <= ndays:
                days.add(day)
        return days


def _nearest_weekday(year: int, month: int, day: int, ndays: int) -> int:
    """Quartz 'W': the weekday nearest ``day``, without leaving the month."""
    weekday = calendar.weekday(year, month, day)  # Monday = 0
    if weekday == 5:  # Saturday: Friday before, unless that leaves the month
        return day - 1 if day > 1 else day + 2
    if weekday == 6:  # Sunday: Monday after, unless that leaves the month
        return day + 1 if day < ndays else day - 2
    return day


def _day_rule(dom_text: str, dow_text: str) -> DayRule:
    dom_values: set[int] = set()
    dom_last = dom_last_weekday = False
    nearest: list[int] = []
    for item in _items(dom_text, DOM):
        if item == "L":
            dom_last = True
        elif item == "LW":
            dom_last_weekday = True
        elif match := _DOM_NEAREST.match(item):
            nearest.append(_value(match.group(1), DOM))
        elif "L" in item or "W" in item:
            raise CronSyntaxError(
                f"day-of-month item '{item}' is not understood; use 'L' (last day), 'LW' (last weekday) or e.g. '15W'."
            )
        else:
            dom_values |= _plain_item(item, DOM)

    dow_values: set[int] = set()
    last: list[int] = []
    nth: list[tuple[int, int]] = []
    for item in _items(dow_text, DOW):
        if match := _DOW_LAST.match(item):
            last.append(_value(match.group(1), DOW) % 7)
        elif match := _DOW_NTH.match(item):
            k = int(match.group(2))
            if not 1 <= k <= 5:
                raise CronSyntaxError(f"day-of-week '{item}': the number after '#' must be 1 to 5.")
            nth.append((_value(match.group(1), DOW) % 7, k))
        elif "L" in item or "#" in item:
            raise CronSyntaxError(
                f"day-of-week item '{item}' is not understood; use e.g. '5L' or 'FRIL' (last Friday) or 'MON#2'."
            )
        else:
            dow_values |= {v % 7 for v in _plain_item(item, DOW)}

    return DayRule(
        frozenset(dom_values),
        dom_last,
        dom_last_weekday,
        tuple(nearest),
        frozenset(dow_values),
        tuple(last),
        tuple(nth),
        both_required=dom_text.startswith("*") or dow_text.startswith("*"),
    )


def expand(expression: str) -> list[str]:
    """The 5 upper-cased fields of an expression, macros expanded; raises CronSyntaxError."""
    text = " ".join(expression.split()).upper()
    if not text:
        raise CronSyntaxError(
            f"the expression is empty; give 5 fields ({FIELD_LAYOUT}) or a macro such as @daily."
        )
    if text.startswith("@"):
        return _expand_macro(text.lower())
    fields = text.split(" ")
    if len(fields) == 6:
        raise CronSyntaxError(
            f"got 6 fields; a seconds (or year) field is not supported. Give 5 fields: {FIELD_LAYOUT}."
        )
    if len(fields) != 5:
        raise CronSyntaxError(f"got {len(fields)} field(s); give 5 fields: {FIELD_LAYOUT}.")
    return fields


def _expand_macro(text: str) -> list[str]:
    if text == "@reboot":
        raise CronSyntaxError(
            "@reboot runs when a machine boots, and a hosted job has no boot; use a time-based schedule such as @daily."
        )
    if text not in MACROS:
        raise CronSyntaxError(f"unknown macro '{text}'; use one of {', '.join(MACROS)}.")
    return MACROS[text].split(" ")


# ---------------------------------------------------------------- the compiled form


def _next_table(allowed: set[int], size: int) -> list[int]:
    """table[i] = smallest allowed value >= i, or -1; one extra slot past the end."""
    table = [-1] * (size + 1)
    following = -1
    for i in range(size - 1, -1, -1):
        if i in allowed:
            following = i
        table[i] = following
    return table


class CronSpec:
    """A parsed expression: field sets plus lookup tables for a fast forward search."""

    __slots__ = (
        "fields",
        "minutes",
        "hours",
        "months",
        "day_rule",
        "fixed_time",
        "can_fire",
        "times_of_day",
        "_next_minute",
        "_next_hour",
        "_next_month",
        "_month_days",
    )

    def __init__(self, fields: list[str]) -> None:
        minute_text, hour_text, dom_text, month_text, dow_text = fields
        self.fields = tuple(fields)
        self.minutes = tuple(sorted(_plain_field(minute_text, MINUTE)))
        self.hours = tuple(sorted(_plain_field(hour_text, HOUR)))
        self.months = tuple(sorted(_plain_field(month_text, MONTH)))
        self.day_rule = _day_rule(dom_text, dow_text)
        # Vixie cron's DST rule keys on the text: a field starting with '*' follows the real clock.
        self.fixed_time = not minute_text.startswith("*") and not hour_text.startswith("*")
        self.times_of_day = tuple(h * 60 + m for h in self.hours for m in self.minutes)
        self._next_minute = _next_table(set(self.minutes), 60)
        self._next_hour = _next_table(set(self.hours), 24)
        self._next_month = _next_table(set(self.months), 13)  # indexed by month 1-12; [13] = -1
        self._month_days: dict[int, tuple[int, ...]] = {}
        self.can_fire = self._fires_in_some_year()

    @property
    def expression(self) -> str:
        return " ".join(self.fields)

    def matches_day(self, year: int, month: int, day: int) -> bool:
        return month in self.months and day in self.days(year, month)

    def days(self, year: int, month: int) -> tuple[int, ...]:
        key = year * 16 + month
        days = self._month_days.get(key)
        if days is None:
            if len(self._month_days) > 2048:  # bound memory in long-lived processes
                self._month_days.clear()
            days = self._month_days[key] = self.day_rule.days(year, month)
        return days

    def _fires_in_some_year(self) -> bool:
        # Weekday/leap-year patterns repeat every 28 years between 1901 and 2099.
        return any(self.day_rule.days(year, month) for year in range(2027, 2055) for month in self.months)

    def first_match(self, wall: int) -> int | None:
        """First matching wall minute (wall seconds) at or after ``wall``; None if none before MAX_YEAR."""
        if not self.can_fire:
            return None
        wall = -(-wall // 60) * 60
        day_number, seconds = divmod(wall, 86400)
        d = date.fromordinal(EPOCH_ORDINAL + day_number)
        year, month, day = d.year, d.month, d.day
        hour, minute = seconds // 3600, seconds % 3600 // 60
        next_month, next_hour, next_minute = self._next_month, self._next_hour, self._next_minute
        while True:
            wanted_month = next_month[month]
            if wanted_month != month:
                if wanted_month < 0:
                    year, wanted_month = year + 1, next_month[1]
                    if year > MAX_YEAR:
                        return None
                month, day, hour, minute = wanted_month, 1, 0, 0
            days = self.days(year, month)
            i = bisect_left(days, day)
            if i == len(days):
                month, day, hour, minute = month + 1, 1, 0, 0
                continue
            if days[i] != day:
                day, hour, minute = days[i], 0, 0
            wanted_hour = next_hour[hour]
            if wanted_hour < 0:
                day, hour, minute = day + 1, 0, 0
                continue
            if wanted_hour != hour:
                hour, minute = wanted_hour, 0
            wanted_minute = next_minute[minute]
            if wanted_minute < 0:
                hour, minute = hour + 1, 0
                continue
            ordinal = date(year, month, day).toordinal()
            return (ordinal - EPOCH_ORDINAL) * 86400 + hour * 3600 + wanted_minute * 60


@lru_cache(maxsize=4096)
def _compile(expression: str) -> CronSpec:
    return CronSpec(expand(expression))


def compile_cron(expression: object, field: str = "schedule.expression") -> CronSpec:
    """The compiled expression (cached), or ScheduleError(invalid_cron) naming ``field``."""
    if not isinstance(expression, str):
        raise ScheduleError("invalid_schedule", field, f"{field}: give the cron expression as a string.")
    if not expression.isascii():  # '٣' and '１' pass isdigit(), U+00A0 passes split()
        raise ScheduleError("invalid_cron", field,
                            f"{field}: use ASCII digits, names and plain spaces only, e.g. '0 3 * * MON'.")
    try:
        return _compile(expression)
    except CronSyntaxError as exc:
        raise ScheduleError("invalid_cron", field, f"{field}: {exc}") from None
