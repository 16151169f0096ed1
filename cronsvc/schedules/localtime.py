"""Wall clock <-> UTC for an IANA zone, as constant-offset segments of the UTC timeline.

Cron is defined on wall-clock time, but runs happen at instants. Between two UTC
offset changes the mapping is trivial (``wall = utc + offset``), so we cut the UTC
timeline into segments of constant offset and let the cron search work on plain
integers inside each segment. DST rules (gaps, repeated hours) then only concern
segment boundaries, where ``prev_offset`` says what the clocks did.

zoneinfo does not expose its transitions, so we find them by probing utcoffset()
every few hours and bisecting to the second; this is done once per (zone, year)
and cached. Segments are also cut at each 1 January (UTC) so that a year can be
loaded on its own; such a cut has ``prev_offset == offset`` and is harmless unless
a fall-back's repeated hour straddled 1 January 00:00 UTC, which no zone in the
tz database does (checked for 1970-2039).
"""

from __future__ import annotations

from bisect import bisect_right
from difflib import get_close_matches
from dataclasses import dataclass
from datetime import date, datetime, timezone
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from .errors import ScheduleError

UTC = timezone.utc
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
# Real zones never change offset twice within this many seconds.
_PROBE_STEP = 6 * 3600
# Searches stop short of datetime's year 9999 limit.
MAX_YEAR = 9998
MAX_TS = (date(MAX_YEAR + 1, 1, 1).toordinal() - EPOCH_ORDINAL) * 86400


@dataclass(frozen=True, slots=True)
class Segment:
    """UTC seconds [start, end) during which the zone's offset is ``offset``."""

    start: int
    end: int
    offset: int
    prev_offset: int  # offset just before ``start``: > offset means clocks fell back


#: Names ZoneInfo opens that are not zones a person means: the host's own zone, the
#: tz database's placeholder and its build rules (right/ counts leap seconds; posix/ and
#: right/ copies are left out of available_timezones).
_NOT_A_ZONE = frozenset({"localtime", "Factory", "posixrules"})


@cache
def _zone_names() -> dict[str, str]:
    """Every accepted IANA name, by its lower case (for suggestions)."""
    return {name.lower(): name for name in available_timezones() if name not in _NOT_A_ZONE}


def zone_name(name: str) -> str:
    """The IANA name a person typed in any case (``europe/paris`` -> ``Europe/Paris``);
    a name that is no zone comes back as typed, for load_zone to refuse with suggestions.
    Forms normalize with it; the API stays strict (load_zone suggests the right case)."""
    return _zone_names().get(name.strip().lower().removeprefix("posix/").removeprefix("right/"), name)


def zone_suggestions(name: str, count: int = 3) -> list[str]:
    """The accepted names closest to ``name``: its right case first, then close spellings
    (``Europe/Pari``) and cities typed without their region (``berlin``)."""
    names = _zone_names()
    lowered = name.lower().removeprefix("posix/").removeprefix("right/")
    if lowered in names:
        return [names[lowered]]
    cities = [full for key, full in names.items() if key.rsplit("/", 1)[-1] == lowered.replace(" ", "_")]
    close = get_close_matches(lowered, list(names), n=count, cutoff=0.75)
    return list(dict.fromkeys(cities + [names[key] for key in close]))[:count]


@cache
def _zone(name: str) -> ZoneInfo:
    return ZoneInfo(name)


def load_zone(name: object, field: str = "schedule.timezone") -> ZoneInfo:
    """The ZoneInfo for an IANA name, or ScheduleError(unknown_timezone); a name in the
    wrong case (``europe/berlin``) gets the right one suggested."""
    if not isinstance(name, str) or not name or name != name.strip():
        raise ScheduleError(
            "unknown_timezone", field,
            f"{field}: give an IANA timezone name such as 'Europe/Berlin', without surrounding spaces."
        )
    if _zone_names().get(name.lower()) != name:
        suggestions = zone_suggestions(name)
        hint = (f"did you mean {' or '.join(repr(s) for s in suggestions)}?" if suggestions
                else "use a name such as 'Europe/Berlin' or 'UTC'.")
        raise ScheduleError("unknown_timezone", field, f"{field}: '{name}' is not a known IANA timezone; {hint}")
    try:
        return _zone(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ScheduleError(
            "unknown_timezone",
            field,
            f"{field}: '{name}' is not a known IANA timezone; use a name such as 'Europe/Berlin' or 'UTC'.",
        ) from None


def year_start(year: int) -> int:
    """UTC seconds at 1 January of ``year``, 00:00 UTC."""
    return (date(year, 1, 1).toordinal() - EPOCH_ORDINAL) * 86400


def year_of(ts: int) -> int:
    """The UTC calendar year containing UTC second ``ts``."""
    return date.fromordinal(EPOCH_ORDINAL + ts // 86400).year


class ZoneTimeline:
    """The constant-offset segments of one zone, loaded a year at a time."""

    def __init__(self, zone: ZoneInfo) -> None:
        self._zone = zone
        self._years: dict[int, tuple[list[int], list[Segment]]] = {}

    def offset_at(self, ts: int) -> int:
        """UTC offset in seconds at UTC second ``ts``."""
        return int(datetime.fromtimestamp(ts, self._zone).utcoffset().total_seconds())

    def segment_at(self, ts: int) -> Segment:
        """The segment containing UTC second ``ts``."""
        year = year_of(ts)
        loaded = self._years.get(year)
        if loaded is None:
            loaded = self._years[year] = self._load_year(year)
        starts, segments = loaded
        return segments[bisect_right(starts, ts) - 1]

    def next_transition(self, ts: int, limit: int) -> int | None:
        """The first real offset change in (ts, limit], or None."""
        segment = self.segment_at(ts)
        while segment.end <= limit:
            following = self.segment_at(segment.end)
            if following.offset != following.prev_offset:
                return following.start
            segment = following
        return None

    def _load_year(self, year: int) -> tuple[list[int], list[Segment]]:
        lo, hi = year_start(year), year_start(year + 1)
        cuts = self._transitions(lo, hi)
        bounds = [lo, *cuts, hi]
        segments = []
        prev_offset = self.offset_at(lo - 1)
        for start, end in zip(bounds, bounds[1:]):
            offset = self.offset_at(start)
            segments.append(Segment(start, end, offset, prev_offset))
            prev_offset = offset
        return [s.start for s in segments], segments

    def _transitions(self, lo: int, hi: int) -> list[int]:
        """UTC seconds in (lo, hi) at which the offset changes."""
        found = []
        probe, offset = lo, self.offset_at(lo)
        while probe < hi - 1:
            nxt = min(probe + _PROBE_STEP, hi - 1)
            nxt_offset = self.offset_at(nxt)
            if nxt_offset != offset:
                found.append(self._bisect_change(probe, nxt, offset))
            probe, offset = nxt, nxt_offset
        return found

    def _bisect_change(self, lo: int, hi: int, offset_lo: int) -> int:
        """First second in (lo, hi] whose offset differs from ``offset_lo``."""
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.offset_at(mid) == offset_lo:
                lo = mid
            else:
                hi = mid
        return hi


@cache
def timeline(name: str) -> ZoneTimeline:
    """The shared, lazily filled timeline of a zone (validates the name)."""
    return ZoneTimeline(load_zone(name))
