"""What execution windows do to a schedule's occurrences: the one rule the scheduler
applies and the preview lists.

- An occurrence at an open instant runs at its time.
- ``skip``: an occurrence outside is recorded as skipped with reason ``outside_window``.
- ``defer``: an occurrence outside runs at the windows' next opening instead; every
  later occurrence before that opening is folded into the same run (one run per
  opening, as misfire's run_once folds missed ones), so the job's next occurrence is the
  first one after the opening.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from .model import Schedule
from .runs import next_run
from .windows import RunWindows, is_open, next_opening

SKIP, DEFER = "skip", "defer"
OUTSIDE_WINDOW = "outside_window"


@dataclass(frozen=True, slots=True)
class Placed:
    """An occurrence and when it runs: ``at`` is the occurrence itself, the opening it
    is deferred to, or None when it is skipped (``reason`` says why it moved)."""

    occurrence: datetime
    at: datetime | None
    reason: str = ""


def place(rules: RunWindows | None, occurrence: datetime, policy: str) -> Placed:
    if rules is None or is_open(rules, occurrence):
        return Placed(occurrence, occurrence)
    if policy == DEFER:
        opening = next_opening(rules, occurrence)
        if opening is not None:
            return Placed(occurrence, opening, OUTSIDE_WINDOW)
    return Placed(occurrence, None, OUTSIDE_WINDOW)


def resume_after(placed: Placed) -> datetime:
    """Where to look for the occurrence after ``placed``: past a deferred run's opening
    (the occurrences up to it are folded into that run), else past the occurrence."""
    if placed.at is not None and placed.at != placed.occurrence:
        return placed.at
    return placed.occurrence


def placed_runs(
    schedule: Schedule,
    rules: RunWindows | None,
    policy: str,
    after: datetime,
    count: int,
    *,
    start_at: datetime | None = None,
    end_at: datetime | None = None,
) -> list[Placed]:
    """Up to ``count`` occurrences after ``after`` with where the windows put them."""
    found: list[Placed] = []
    cursor = after
    while len(found) < count:
        occurrence = next_run(schedule, cursor, start_at=start_at, end_at=end_at)
        if occurrence is None:
            break
        placed = place(rules, occurrence, policy)
        found.append(placed)
        cursor = resume_after(placed)
    return found

