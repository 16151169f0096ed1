"""Heartbeats of the long-running processes (schedulers, workers), shown by /readyz and
the admin. Each process beats at most every HEARTBEAT_INTERVAL seconds, at the database's
time (apps/sql/clock.py: a skewed process neither looks dead nor outlives its death), and
carries the process's clock skew measured then (apps/observability/clock.py)."""

import logging
import os
import socket
import threading
import time
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection
from apps.sql import clock

from .clock import report_skew, skewed
from .models import Heartbeat

log = logging.getLogger("cronsvc.heartbeat")

PRUNE_AFTER = timedelta(days=1)


def alive_after(now):
    """A process whose last beat is older than this is presumed dead."""
    return now - timedelta(seconds=3 * settings.HEARTBEAT_INTERVAL)


class Beat:
    """One process's heartbeat row; ``beat(now)`` writes only when the interval passed."""

    def __init__(self, kind, name=None, detail=None):
        self.kind = kind
        self.hostname = socket.gethostname()
        self.pid = os.getpid()
        self.name = name or f"{self.hostname}:{self.pid}"
        self.key = f"{kind}:{self.hostname}:{self.pid}"
        self.detail = detail or {}
        self.started_at = None  # the database's time of the first beat
        self._next = 0.0

    def beat(self, now=None, *, force=False, skew_seconds=None):
        """``now``: the database's time (read here when not given, with the skew)."""
        if not force and time.monotonic() < self._next:
            return False
        self._next = time.monotonic() + settings.HEARTBEAT_INTERVAL
        if now is None:
            reading = clock.reading()
            now, skew_seconds = reading.at, reading.skew_seconds
        self.started_at = self.started_at or now
        updated = Heartbeat.objects.filter(key=self.key).update(last_seen=now, clock_skew_seconds=skew_seconds)
        if not updated:
            Heartbeat.objects.update_or_create(key=self.key, defaults=dict(
                kind=self.kind, name=self.name, hostname=self.hostname, pid=self.pid,
                started_at=self.started_at, last_seen=now, detail=self.detail, clock_skew_seconds=skew_seconds,
            ))
            Heartbeat.objects.filter(last_seen__lt=now - PRUNE_AFTER).delete()
        return True

    def stop(self):
        Heartbeat.objects.filter(key=self.key).delete()


class WorkerBeat(threading.Thread):
    """A daemon thread in a Celery worker process: beats until ``stop()``."""

    def __init__(self, name, queues):
        super().__init__(name="heartbeat", daemon=True)
        self.heartbeat = Beat(Heartbeat.Kind.WORKER, name=name, detail={"queues": sorted(queues)})
        self._stopping = threading.Event()

    def run(self):
        while not self._stopping.is_set():
            try:
                close_old_connections()
                reading = clock.reading()
                report_skew("worker", reading.skew_seconds)
                self.heartbeat.beat(reading.at, force=True, skew_seconds=reading.skew_seconds)
            except Exception:  # noqa: BLE001 - a missed beat is reported by its absence
                log.warning("worker heartbeat failed", exc_info=True)
                connection.close()
            self._stopping.wait(settings.HEARTBEAT_INTERVAL)
        connection.close()

    def stop(self):
        self._stopping.set()
        try:
            self.heartbeat.stop()
        except Exception:  # noqa: BLE001 - shutting down anyway; the row ages out
            log.warning("could not remove the worker heartbeat", exc_info=True)


def snapshot(now=None):
    """Every known process with its age, whether it is alive and its clock skew, grouped
    by kind. ``now``: the database's time (read when not given)."""
    now = now or clock.database_now()
    threshold = alive_after(now)
    groups = {"schedulers": [], "workers": []}
    rows = Heartbeat.objects.order_by("kind", "name").values(
        "kind", "name", "last_seen", "detail", "clock_skew_seconds")[:200]
    for row in rows:
        skew = row["clock_skew_seconds"]
        groups["schedulers" if row["kind"] == Heartbeat.Kind.SCHEDULER else "workers"].append({
            "name": row["name"],
            "last_seen": row["last_seen"].isoformat(),
            "age_seconds": round((now - row["last_seen"]).total_seconds(), 1),
            "alive": row["last_seen"] >= threshold,
            "clock_skew_seconds": None if skew is None else round(skew, 3),
            "clock_skewed": skewed(skew),
            **({"queues": row["detail"]["queues"]} if "queues" in (row["detail"] or {}) else {}),
        })
    return groups
