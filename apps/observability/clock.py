"""Clock skew: how far a process's own clock is from the database's (apps/sql/clock.py).

The database's clock decides what is due (docs/architecture.md, "One clock"), so a skewed
process can no longer fire early or move a schedule; it is still worth an operator's look
(its logs' times are wrong, and a badly skewed host usually has a broken NTP). Every
process that reads the database's time reports its skew here: a gauge
``cronsvc_clock_skew_seconds{process}`` (positive: the process is ahead), a log warning
while it exceeds CLOCK_SKEW_WARN_SECONDS (at most once a minute per process kind), and the
schedulers' and workers' heartbeats carry it to /readyz.
"""

import logging
import time

from django.conf import settings

from .metrics import CLOCK_SKEW

log = logging.getLogger("cronsvc.clock")

WARN_EVERY = 60.0  # seconds between two warnings of one process kind
_warned_at = {}


def skewed(seconds):
    """True when ``seconds`` of skew is past the threshold (CLOCK_SKEW_WARN_SECONDS)."""
    return seconds is not None and abs(seconds) > settings.CLOCK_SKEW_WARN_SECONDS


def report_skew(process, seconds):
    """Record one measurement of a process kind's skew (``scheduler``, ``worker``, ``web``)."""
    CLOCK_SKEW.labels(process).set(seconds)
    if not skewed(seconds):
        if _warned_at.pop(process, None) is not None:
            log.info("clock skew: this %s's clock is back within %.1fs of the database's (%.3fs)",
                     process, settings.CLOCK_SKEW_WARN_SECONDS, seconds)
        return False
    last = _warned_at.get(process)
    if last is None or time.monotonic() - last >= WARN_EVERY:
        _warned_at[process] = time.monotonic()
        log.warning("clock skew: this %s's clock is %+.3fs off the database's (threshold %.1fs); schedules follow "
                    "the database's clock, but check NTP on this host", process, seconds,
                    settings.CLOCK_SKEW_WARN_SECONDS)
    return True


def scheduler_skew(seconds):
    return report_skew("scheduler", seconds)
