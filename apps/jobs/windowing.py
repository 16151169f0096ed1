"""A job's execution windows (its ``windows``, ``blackouts`` and ``outside_window``
columns) as the engine's values, and what they do to the occurrences a scheduler tick
found due (cronsvc.schedules.window_runs has the rule)."""

import json
import logging
from functools import lru_cache

from cronsvc.schedules import ScheduleError, next_run
from cronsvc.schedules.window_parse import parse_run_windows
from cronsvc.schedules.window_runs import OUTSIDE_WINDOW, place, placed_runs, resume_after

from .scheduling import job_schedule

log = logging.getLogger(__name__)
_NONE = (None, [], "[]", "null")  # the scheduler's claim reads them as jsonb's text


def job_windows(job):
    """The job's RunWindows, or None when it names no window and no blackout (the
    common case costs two truth tests)."""
    if job.windows in _NONE and job.blackouts in _NONE:
        return None
    return _parsed(_text(job.windows), _text(job.blackouts), job.timezone)


def _text(value):
    # The scheduler's claim hands jsonb over as text; a Job, as Python values.
    return value if isinstance(value, str) else json.dumps(value or [], sort_keys=True)


@lru_cache(maxsize=4096)
def _parsed(windows, blackouts, zone):
    # Validated when the job was saved (API, pages, admin): parsing again here only builds
    # the values, once per distinct definition in the process. A definition written some
    # other way (SQL) that does not parse must not stop a scheduler's whole batch: the job
    # then runs as if it had no windows, and the log says so.
    try:
        return parse_run_windows(json.loads(windows), json.loads(blackouts), zone)
    except (ScheduleError, ValueError):
        log.error("job windows %s / blackouts %s (%s) do not parse; ignored", windows, blackouts, zone)
        return None


def apply_windows(job, schedule, runs, following):
    """Split the occurrences a tick would run into (runs, skips, deferred, following):
    ``skips`` as (occurrence, reason), ``deferred`` as Placed (run at ``.at``, the next
    opening), ``following`` the job's next occurrence (past a deferred run's opening:
    the occurrences up to it are folded into that run)."""
    rules = job_windows(job)
    if rules is None:
        return runs, [], [], following
    kept, skips, deferred = [], [], []
    folded_until = None
    for occurrence in runs:
        if folded_until is not None and occurrence <= folded_until:
            continue
        placed = place(rules, occurrence, job.outside_window)
        if placed.at is None:
            skips.append((occurrence, OUTSIDE_WINDOW))
        elif placed.at == occurrence:
            kept.append(occurrence)
        else:
            deferred.append(placed)
            folded_until = resume_after(placed)
    if folded_until is not None and following is not None and following <= folded_until:
        following = next_run(schedule, folded_until, start_at=job.start_at, end_at=job.end_at)
    return kept, skips, deferred, following


def job_next_runs(job, after, count):
    """The job's next ``count`` occurrences after ``after`` and where its windows put them
    (Placed: ``at`` None = skipped, ``at`` != occurrence = deferred), for the previews."""
    return placed_runs(job_schedule(job), job_windows(job), job.outside_window, after, count,
                       start_at=job.start_at, end_at=job.end_at)
