"""The one clock: PostgreSQL's (docs/architecture.md, "One clock").

What is due, what is late and where a schedule goes next are decided at the database's
time, never at a process's own, which may be skewed or jump (a bad NTP step, a VM
resumed, libfaketime). A process reads the database's time once per round
(``reading()``): the same read tells it how far its own clock is off (``skew_seconds``),
which observability reports. Between reads a process may estimate the database's time
by adding its monotonic clock's progress (``Reading.now()``); that is for pacing and
metrics only, never for a decision.

SQLite (the embedded mode) runs on one machine: its clock is the process's.
"""

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db import connection
from django.utils import timezone

from .modes import on_postgresql

_NOW = "SELECT clock_timestamp()"


@dataclass(frozen=True)
class Reading:
    """The database's time at one instant, and how far this process's clock was off then
    (positive: the process is ahead). ``monotonic`` anchors ``now()``."""

    at: datetime
    skew_seconds: float
    monotonic: float = field(default_factory=time.monotonic)

    def now(self):
        """An estimate of the database's time now (pacing and metrics only)."""
        return self.at + timedelta(seconds=max(0.0, time.monotonic() - self.monotonic))


def reading(using=None):
    """One round trip: the database's clock_timestamp() and this process's skew, measured
    against the midpoint of the round trip (error at most half of it)."""
    conn = connection if using is None else using
    if not on_postgresql(conn):
        now = timezone.now()
        return Reading(at=now, skew_seconds=0.0)
    before = time.time()
    with conn.cursor() as cursor:
        cursor.execute(_NOW)
        (at,) = cursor.fetchone()
    after = time.time()
    return Reading(at=at, skew_seconds=(before + after) / 2 - at.timestamp())


def database_now():
    """The database's time (one round trip)."""
    return reading().at
