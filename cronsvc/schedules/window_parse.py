"""The API shape of execution windows and blackouts <-> the values in windows.py.

    "windows":   [{"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "18:00"},
                  {"days": ["sat"], "start": "22:00", "end": "06:00", "overnight": true}]
    "blackouts": [{"start": "2027-12-24", "end": "2027-12-26"}]

Every refusal is a ScheduleError with a stable code and the path of the offending input
(``windows.1.end``), its message saying what to send instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import date, time

from .errors import ScheduleError
from .windows import DAY_NAMES, Blackout, RunWindows, Window

MAX_WINDOWS = 14
MAX_BLACKOUTS = 50
_WEEK_MINUTES = 7 * 1440
_WINDOW_KEYS = ("days", "start", "end", "overnight")
_BLACKOUT_KEYS = ("start", "end")
_FULL_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_DAY_INDEX = {**{name: i for i, name in enumerate(DAY_NAMES)}, **{name: i for i, name in enumerate(_FULL_NAMES)}}


def parse_run_windows(windows: object, blackouts: object, timezone: str = "UTC") -> RunWindows:
    return RunWindows(parse_windows(windows), parse_blackouts(blackouts), timezone)


def parse_windows(data: object, field: str = "windows") -> tuple[Window, ...]:
    items = _list(data, field, "invalid_windows",
                  'e.g. [{"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "18:00"}]')
    if len(items) > MAX_WINDOWS:
        raise ScheduleError("too_many_windows", field,
                            f"{field}: at most {MAX_WINDOWS} windows; merge windows that share their hours.")
    windows = tuple(_window(item, f"{field}.{index}") for index, item in enumerate(items))
    _refuse_overlaps(windows, field)
    return windows


def parse_blackouts(data: object, field: str = "blackouts") -> tuple[Blackout, ...]:
    items = _list(data, field, "invalid_blackout", 'e.g. [{"start": "2027-12-24", "end": "2027-12-26"}]')
    if len(items) > MAX_BLACKOUTS:
        raise ScheduleError("too_many_blackouts", field,
                            f"{field}: at most {MAX_BLACKOUTS} blackouts; remove the ones already past.")
    return tuple(_blackout(item, f"{field}.{index}") for index, item in enumerate(items))


def windows_to_list(windows: tuple[Window, ...]) -> list[dict]:
    out = []
    for window in windows:
        item = {"days": [DAY_NAMES[d] for d in sorted(window.days)],
                "start": window.start.strftime("%H:%M"), "end": window.end.strftime("%H:%M")}
        if window.overnight:
            item["overnight"] = True
        out.append(item)
    return out


def blackouts_to_list(blackouts: tuple[Blackout, ...]) -> list[dict]:
    return [{"start": b.first.isoformat(), "end": b.last.isoformat()} for b in blackouts]


def _list(data: object, field: str, code: str, example: str) -> list:
    if data is None:
        return []
    if not isinstance(data, list):
        raise ScheduleError(code, field, f"{field}: give a list, {example}, or [] for none.")
    return data


def _object(item: object, field: str, keys: tuple[str, ...], code: str) -> Mapping:
    if not isinstance(item, Mapping):
        raise ScheduleError(code, field, f"{field}: give an object with {', '.join(keys)}.")
    for key in item:
        if key not in keys:
            raise ScheduleError(code, f"{field}.{key}", f"{field}.{key}: unknown field; allowed: {', '.join(keys)}.")
    return item


def _window(item: object, field: str) -> Window:
    item = _object(item, field, _WINDOW_KEYS, "invalid_windows")
    days = _days(item.get("days"), f"{field}.days")
    start = _clock(item.get("start"), f"{field}.start")
    end = _clock(item.get("end"), f"{field}.end")
    overnight = item.get("overnight", False)
    if not isinstance(overnight, bool):
        raise ScheduleError("invalid_windows", f"{field}.overnight", f"{field}.overnight: give true or false.")
    if not overnight and end <= start:
        raise ScheduleError(
            "window_end_before_start", f"{field}.end",
            f"{field}.end: {end:%H:%M} is not after start {start:%H:%M}; give a later end, or set "
            '"overnight": true for a window that closes the next day (e.g. 22:00 to 06:00).')
    if overnight and end > start:
        raise ScheduleError(
            "invalid_windows", f"{field}.overnight",
            f"{field}.overnight: an overnight window closes the next day at {end:%H:%M}, more than 24 hours "
            f"after it opens at {start:%H:%M}; drop \"overnight\" or give an end at or before the start.")
    return Window(days, start, end, overnight)


def _days(value: object, field: str) -> frozenset[int]:
    if not isinstance(value, list) or not value:
        raise ScheduleError("invalid_weekday", field,
                            f"{field}: give a non-empty list of days from {', '.join(DAY_NAMES)}.")
    days = set()
    for index, name in enumerate(value):
        day = _DAY_INDEX.get(name.strip().lower()) if isinstance(name, str) else None
        if day is None:
            raise ScheduleError("invalid_weekday", f"{field}.{index}",
                                f"{field}.{index}: {name!r} is not a day; use one of {', '.join(DAY_NAMES)}.")
        days.add(day)
    return frozenset(days)


def _clock(value: object, field: str) -> time:
    parsed = None
    if isinstance(value, str) and len(value.strip()) == 5 and value.strip()[2] == ":":
        try:
            parsed = time.fromisoformat(value.strip())
        except ValueError:
            parsed = None
    if parsed is None:
        raise ScheduleError("invalid_window_time", field,
                            f"{field}: give a local time as HH:MM from 00:00 to 23:59, e.g. '08:00'.")
    return parsed


def _blackout(item: object, field: str) -> Blackout:
    item = _object(item, field, _BLACKOUT_KEYS, "invalid_blackout")
    first = _date(item.get("start"), f"{field}.start")
    last = _date(item.get("end", item.get("start")), f"{field}.end")
    if last < first:
        raise ScheduleError(
            "blackout_end_before_start", f"{field}.end",
            f"{field}.end: {last.isoformat()} is before start {first.isoformat()}; give an end on or after "
            "the start (both days are included).")
    return Blackout(first, last)


def _date(value: object, field: str) -> date:
    try:
        if isinstance(value, str) and len(value.strip()) == 10:
            return date.fromisoformat(value.strip())
    except ValueError:
        pass
    raise ScheduleError("invalid_blackout", field,
                        f"{field}: give a local date as YYYY-MM-DD, e.g. '2027-12-24'.")


def _refuse_overlaps(windows: tuple[Window, ...], field: str) -> None:
    """Two windows open at the same minute of the week are refused: one of them is
    redundant or a typo (overlapping hours would also make their order matter)."""
    spans = []  # (start minute of the week, end minute, window index)
    for index, window in enumerate(windows):
        length = (window.end.hour * 60 + window.end.minute) - (window.start.hour * 60 + window.start.minute)
        if window.overnight:
            length += 1440
        for day in window.days:
            begin = day * 1440 + window.start.hour * 60 + window.start.minute
            end = begin + length
            spans.append((begin, min(end, _WEEK_MINUTES), index))
            if end > _WEEK_MINUTES:  # Sunday's overnight window runs into Monday
                spans.append((0, end - _WEEK_MINUTES, index))
    spans.sort()
    for (begin_a, end_a, a), (begin_b, _, b) in zip(spans, spans[1:]):
        if begin_b < end_a:
            first, second = sorted((a, b))
            day = DAY_NAMES[begin_b // 1440]
            raise ScheduleError(
                "overlapping_windows", f"{field}.{second}",
                f"{field}.{second}: overlaps {field}.{first} on {day}; make the windows disjoint "
                "(one may end where the next starts).")
