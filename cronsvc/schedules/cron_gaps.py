"""The smallest real gap between consecutive runs of a cron expression over a horizon.

Plans limit how often a job may run, and DST can bring two runs closer than their
wall-clock times suggest (``10,50 1,3 * * *`` on a spring-forward night runs at
01:50 and 03:10, 20 real minutes apart). So we measure real gaps between actual
runs. Enumerating every run of ``*/2 * * * *`` over five weeks would be slow, so on
a day where no offset change intervenes the rest of the day's runs are exactly the
remaining times of day, and we take their smallest gap from a table and jump to
the day's last run. Days touched by a transition are walked run by run.
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import date

from .cron import CronSpec
from .cron_runs import next_cron_ts
from .localtime import EPOCH_ORDINAL, ZoneTimeline

_NO_GAP = 1 << 62
_SMALLEST_POSSIBLE = 60


def cron_min_gap(spec: CronSpec, timeline: ZoneTimeline, after: int, until: int) -> int | None:
    """Smallest gap in seconds between consecutive runs in (after, until]; None if < 2 runs."""
    times = spec.times_of_day
    gap_from = _suffix_min_gaps(times)
    best, prev, t = _NO_GAP, None, after
    while best > _SMALLEST_POSSIBLE:
        run = next_cron_ts(spec, timeline, t)
        if run is None or run > until:
            break
        if prev is not None:
            best = min(best, run - prev)
        prev = t = run
        skip = _rest_of_day(spec, timeline, run, until)
        if skip is not None:
            index, last = skip
            best = min(best, gap_from[index])
            prev = t = last
    return None if best == _NO_GAP else best


def _rest_of_day(spec: CronSpec, timeline: ZoneTimeline, run: int, until: int) -> tuple[int, int] | None:
    """If every later time of ``run``'s local day is surely a run, (index of run's time, last run)."""
    segment = timeline.segment_at(run)
    wall = run + segment.offset
    if wall % 60:
        return None
    day_number, seconds = divmod(wall, 86400)
    times = spec.times_of_day
    index = bisect_right(times, seconds // 60) - 1
    if index < 0 or times[index] * 60 != seconds or index == len(times) - 1:
        return None  # a run moved by a DST gap, or the day's last run
    d = date.fromordinal(EPOCH_ORDINAL + day_number)
    if not spec.matches_day(d.year, d.month, d.day):
        return None
    last = day_number * 86400 + times[-1] * 60 - segment.offset
    if last > until or last >= segment.end:
        return None  # an offset change (or the horizon) comes first: walk run by run
    return index, last


def _suffix_min_gaps(times: tuple[int, ...]) -> list[int]:
    """gaps[i] = smallest gap (seconds) between consecutive times from times[i] onwards."""
    gaps = [_NO_GAP] * len(times)
    for i in range(len(times) - 2, -1, -1):
        gaps[i] = min(gaps[i + 1], (times[i + 1] - times[i]) * 60)
    return gaps
