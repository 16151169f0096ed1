"""A worker process's heartbeat: it renews the leases of the runs it holds.

A claim gives a run a short lease (LEASE_SECONDS, on the database's clock) under a new
token (docs/architecture.md, "Fenced leases"). While the process holds the run — from its
claim until its result is recorded, however long its request or script takes — one
thread renews the leases of all the runs it holds, every third of LEASE_SECONDS, in one
conditional UPDATE (queries.RENEW_LEASES: only rows still ``running`` under the process's
token). A process that dies, or stops (SIGSTOP, a VM paused, a stalled database
connection), renews nothing: its runs' leases end within LEASE_SECONDS and the sweeper
takes them back, and whatever the process records later is superseded. A run missing from
the renewed ones (taken back, cancelled, its job deleted) is no longer held.
"""

import logging
import os
import threading
import time

from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from apps.sql.modes import on_postgresql

from .. import queries
from ..models import Execution

log = logging.getLogger("cronsvc.worker")


class LeaseRenewer:
    def __init__(self, lease_seconds, *, thread=True):
        """``thread=False``: no thread of its own; the caller calls ``beat`` (tests)."""
        self.lease_seconds = lease_seconds
        self._threaded = thread
        self.interval = max(0.2, lease_seconds / 3)
        self._held = {}  # execution id -> the lease token of this process's claim
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._thread = None

    def hold(self, executions):
        """Renew these claimed runs' leases until ``release``."""
        if not executions:
            return
        with self._lock:
            for execution in executions:
                self._held[execution.id] = execution.lease_token
            if self._thread is None and self._threaded:
                self._thread = threading.Thread(target=self._loop, name="lease-heartbeat", daemon=True)
                self._thread.start()
            self._cond.notify()

    def release(self, execution_ids):
        with self._lock:
            for execution_id in execution_ids:
                self._held.pop(execution_id, None)

    @property
    def held(self):
        with self._lock:
            return dict(self._held)

    def beat(self):
        """Renew every lease held now (one statement); returns how many were renewed."""
        held = self.held
        if not held:
            return 0
        renewed = _renew(held, self.lease_seconds)
        lost = [execution_id for execution_id in held if execution_id not in renewed]
        if lost:
            with self._lock:
                for execution_id in lost:
                    if self._held.get(execution_id) == held[execution_id]:
                        del self._held[execution_id]
            log.info("%d runs no longer held by this worker (taken back, cancelled or deleted)", len(lost))
        return len(renewed)

    def _loop(self):
        from django.db import close_old_connections

        while True:
            with self._cond:
                if not self._held:
                    connection.close()  # idle: no connection kept open for nothing
                self._cond.wait_for(lambda: self._held)
            time.sleep(self.interval)
            try:
                close_old_connections()
                self.beat()
            except Exception as exc:  # noqa: BLE001 - the database away: the leases run out, the sweeper takes them back
                log.warning("renewing the leases of %d runs failed: %s", len(self.held), exc)


def _renew(held, lease_seconds):
    if on_postgresql():
        return queries.renew_leases(list(held.items()), lease_seconds)
    # the embedded mode's SQLite: one worker, few runs
    until = timezone.now() + timedelta(seconds=lease_seconds)
    return {execution_id for execution_id, token in held.items()
            if Execution.objects.filter(id=execution_id, status=Execution.Status.RUNNING, lease_token=token)
            .update(lease_expires_at=until)}


_heartbeat = {"pid": None, "heartbeat": None}
_lock = threading.Lock()


def heartbeat():
    """The process's heartbeat (a forked child makes its own: threads do not survive a fork)."""
    with _lock:
        if _heartbeat["pid"] != os.getpid():
            _heartbeat.update(pid=os.getpid(), heartbeat=LeaseRenewer(settings.LEASE_SECONDS))
        return _heartbeat["heartbeat"]
