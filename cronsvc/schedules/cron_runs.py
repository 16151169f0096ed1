"""Next run of a cron expression as a UTC instant, with Vixie cron's DST rules.

We walk the zone's constant-offset segments (localtime.py) from ``after`` onwards
and, in each, search wall-clock time for the first match (cron.py). Inside a
segment wall = utc + offset is a bijection, so the real-clock rule is automatic:
a wall time in a spring-forward gap belongs to no segment and never matches, and a
wall time repeated by a fall-back belongs to two segments and matches twice.

Fixed-time jobs (minute and hour fields not starting with '*') get Vixie's two
exceptions, both decided at the segment's start:
  * clocks fell back (prev_offset > offset): the wall times [start + offset,
    start + prev_offset) already happened in the previous segment; skip them.
  * clocks sprang forward (prev_offset < offset): if any wall time in the skipped
    range [start + prev_offset, start + offset) matches, run once at ``start``, the
    first instant after the gap. Several skipped matches, and a match at the gap's
    end, all land on that one instant: one run.

All times are integer seconds (UTC or wall); runs fall on whole seconds, so
"strictly after a fractional instant" equals "strictly after its floor".
"""

from __future__ import annotations

from .cron import CronSpec
from .localtime import MAX_TS, ZoneTimeline


def next_cron_ts(spec: CronSpec, timeline: ZoneTimeline, after: int) -> int | None:
    """First run strictly after UTC second ``after``, as UTC seconds; None if none."""
    if after >= MAX_TS or not spec.can_fire:
        return None
    segment = timeline.segment_at(after)
    lowest_wall = (after + segment.offset) // 60 * 60 + 60  # first wall minute strictly after
    while True:
        offset, prev_offset = segment.offset, segment.prev_offset
        if spec.fixed_time and prev_offset != offset:
            if prev_offset > offset:
                lowest_wall = max(lowest_wall, segment.start + prev_offset)
            elif segment.start > after and _matches_in(
                spec, segment.start + prev_offset, segment.start + offset
            ):
                return segment.start
        wall = spec.first_match(lowest_wall)
        if wall is None:
            return None
        if wall < segment.end + offset:
            return wall - offset
        if segment.end >= MAX_TS:
            return None
        segment = timeline.segment_at(segment.end)
        lowest_wall = segment.start + segment.offset


def _matches_in(spec: CronSpec, wall_from: int, wall_to: int) -> bool:
    """Does the expression match a wall minute in [wall_from, wall_to)?"""
    wall = spec.first_match(wall_from)
    return wall is not None and wall < wall_to
