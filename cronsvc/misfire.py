"""What to do with occurrences that came due while nobody was dispatching them.

Pure function over instants: the scheduler hands in every occurrence that is due
(``<= now``, oldest first) and gets back which to run and which to record as skipped.

- ``run_once`` (default): run the latest due occurrence if it is within the grace
  window; the older ones are skipped (``misfire_coalesced``).
- ``run_all``: run every due occurrence within the grace window, oldest first, at most
  ``cap`` of them; the rest are skipped (``misfire_cap``).
- ``skip``: run the latest occurrence only if it is on time (late by no more than
  ``on_time_seconds``); every missed one is skipped (``misfire_skipped``).
Under every policy an occurrence older than the grace window is skipped
(``misfire_expired``).

``now`` is the database's time (docs/architecture.md, "One clock"). ``more=True`` says
later occurrences are due too (the scheduler records a long catch-up a slice a tick): none
of these is then the latest, so ``run_once`` and ``skip`` run none of them.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

RUN_ONCE = "run_once"
RUN_ALL = "run_all"
SKIP = "skip"


@dataclass
class CatchUp:
    run: list[datetime] = field(default_factory=list)
    skip: list[tuple[datetime, str]] = field(default_factory=list)


def plan_catch_up(due, *, now, policy, grace_seconds, on_time_seconds=60, cap=100, more=False):
    """Split due occurrences (sorted, all <= now) into runs and skips; every one of them
    ends in exactly one of the two."""
    plan = CatchUp()
    if not due:
        return plan
    grace_start = now - timedelta(seconds=grace_seconds)
    fresh = [t for t in due if t >= grace_start]
    plan.skip.extend((t, "misfire_expired") for t in due if t < grace_start)
    if not fresh:
        return plan
    if policy == RUN_ALL:
        plan.run.extend(fresh[:cap])
        plan.skip.extend((t, "misfire_cap") for t in fresh[cap:])
    elif more:
        reason = "misfire_skipped" if policy == SKIP else "misfire_coalesced"
        plan.skip.extend((t, reason) for t in fresh)
    elif policy == SKIP:
        latest = fresh[-1]
        on_time = now - latest <= timedelta(seconds=on_time_seconds)
        plan.skip.extend((t, "misfire_skipped") for t in fresh[:-1])
        if on_time:
            plan.run.append(latest)
        else:
            plan.skip.append((latest, "misfire_skipped"))
    else:
        plan.skip.extend((t, "misfire_coalesced") for t in fresh[:-1])
        plan.run.append(fresh[-1])
    plan.skip.sort()
    return plan
