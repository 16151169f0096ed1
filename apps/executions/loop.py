"""The scheduler process: tick, publish, sweep, sleep; stop cleanly on SIGTERM/SIGINT."""

import logging
import signal
import statistics
import time
from datetime import timedelta
from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import close_old_connections, connection
from django.db.utils import DatabaseError, InterfaceError, OperationalError
from django.utils import timezone

from apps.eventstream import relay
from apps.jobs.models import Job

from . import broker_queues, hooks, publishing, sweeper
from .overload import OverloadGate
from .routing import LOW, queue_for
from .scheduler import claim_due

log = logging.getLogger("cronsvc.scheduler")

MAX_BACKOFF = 30.0


@dataclass
class LoopState:
    stopping: bool = False
    last_sweep: float = 0.0
    failures: int = 0


class SchedulerLoop:
    def __init__(self, *, batch_size=None, max_sleep=None, sweep_interval=None, clock=timezone.now):
        self.batch_size = batch_size or settings.SCHEDULER_BATCH_SIZE
        self.max_sleep = settings.SCHEDULER_MAX_SLEEP if max_sleep is None else max_sleep
        self.sweep_interval = settings.SWEEPER_INTERVAL if sweep_interval is None else sweep_interval
        self.clock = clock
        self.state = LoopState()
        self.report = hooks.scheduler_report()  # observability's metrics and heartbeat
        self.heartbeat = self.report.heartbeat("scheduler")
        self.overload = OverloadGate()

    def install_signal_handlers(self):
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._request_stop)

    def _request_stop(self, signum, frame):
        log.info("scheduler: signal %s received, stopping after this tick", signum)
        self.state.stopping = True

    def run(self, *, max_ticks=None):
        ticks = 0
        while not self.state.stopping and (max_ticks is None or ticks < max_ticks):
            ticks += 1
            try:
                busy = self.tick()
                self.state.failures = 0
            except (OperationalError, InterfaceError, DatabaseError) as exc:
                self._back_off(exc)
                continue
            if not busy:
                self._sleep(self._idle_sleep())
        self._stop_heartbeat()
        log.info("scheduler: stopped")

    def tick(self):
        """One round; returns True when the batch was full (more work is waiting)."""
        close_old_connections()
        now = self.clock()
        self.heartbeat.beat()  # at most every HEARTBEAT_INTERVAL seconds
        overloaded = self.overload.overloaded()
        result = claim_due(now, self.batch_size, overloaded)
        published = self._publish(result.to_publish)
        if result.claimed:
            self._log_tick(result, published)
        self._publish_due_retries(now, overloaded)
        hooks.run_tick_hooks(now)  # e.g. heartbeat monitors past their grace go late/down (decided once)
        # Dispatch first: while due jobs wait (a full batch) a tick publishes a few events,
        # the rest wait in the outbox until the burst has drained.
        backlogged = result.claimed >= self.batch_size
        batch = relay.BUSY_BATCH if backlogged else relay.BATCH
        relayed = self._relay_events(batch)
        self._maybe_sweep()
        return backlogged or relayed >= batch

    @staticmethod
    def _relay_events(batch):
        """Publish the event stream's outbox (one scheduler at a time; apps.eventstream.relay).
        Redis unreachable: the events wait in the outbox for a later tick."""
        try:
            return relay.relay_round(batch)
        except redis.RedisError as exc:
            log.warning("event stream: Redis unavailable (%s); events wait in the outbox", exc)
            return 0

    def _publish(self, to_publish):
        if not to_publish:
            return 0
        grouped = publishing.group_by_queue((execution_id, queue) for execution_id, queue, _ in to_publish)
        return publishing.publish(grouped)

    def _log_tick(self, result, published):
        sent_at = self.clock()
        lags = sorted((sent_at - due_at).total_seconds() for _, _, due_at in result.to_publish)
        lag_p50 = statistics.median(lags) if lags else 0.0
        self.report.dispatched(lags, published)
        log.info(
            "scheduler tick: claimed=%d created=%d skipped=%d expired=%d deferred=%d published=%d lag_p50=%.3fs "
            "lag_max=%.3fs", result.claimed, result.created, result.skipped, result.expired, result.deferred, published,
            lag_p50, lags[-1] if lags else 0.0,
        )

    def _publish_due_retries(self, now, overloaded=frozenset()):
        held = [queue_for(queue, priority=LOW) for queue in overloaded]
        rows = sweeper.due_retries(now, held_queues=held)
        if rows:
            publishing.publish(publishing.group_by_queue(rows))
            self.report.retries_published(len(rows))

    def _maybe_sweep(self):
        if time.monotonic() - self.state.last_sweep < self.sweep_interval:
            return
        self.state.last_sweep = time.monotonic()
        now = self.clock()
        recovered = sweeper.recover_expired_leases()  # on the database's clock
        lost = sweeper.stale(now, republish_after=settings.SWEEPER_REPUBLISH_AFTER,
                             idle_queues=self._idle_queues(), idle_after=settings.SWEEPER_REPUBLISH_IDLE_AFTER)
        rows = recovered + lost
        self.report.swept(len(recovered), len(lost))
        if rows:
            published = publishing.publish(publishing.group_by_queue(rows))
            log.info("sweeper: recovered=%d republished=%d sent=%d", len(recovered), len(lost), published)
        backlog = self.backlog(now)
        self.report.backlog(backlog)
        if backlog:
            log.warning("scheduler backlog: %d jobs due more than a second ago are not claimed yet", backlog)

    @staticmethod
    def _idle_queues():
        """Queues with no message waiting (none when the broker cannot say)."""
        try:
            return [queue for queue, depth in broker_queues.queue_depths(broker_queues.known_queues()).items()
                    if depth == 0]
        except Exception:  # noqa: BLE001 - the sweep goes on with the long delay only
            log.warning("queue depths unavailable; lost messages wait SWEEPER_REPUBLISH_AFTER", exc_info=True)
            return []

    def backlog(self, now, cap=10_000):
        """Jobs due for over a second and still unclaimed (capped count)."""
        overdue = Job.objects.filter(
            enabled=True, next_run_at__isnull=False, next_run_at__lte=now - timedelta(seconds=1)
        )
        return overdue.values("id")[:cap].count()

    def _stop_heartbeat(self):
        self.report.exited()
        try:
            self.heartbeat.stop()
        except (OperationalError, InterfaceError, DatabaseError):
            log.warning("scheduler: could not remove its heartbeat; it ages out")

    def _idle_sleep(self):
        """Sleep until the next job is due, but never longer than max_sleep."""
        next_due = (
            Job.objects.filter(enabled=True, next_run_at__isnull=False)
            .order_by("next_run_at").values_list("next_run_at", flat=True).first()
        )
        if next_due is None:
            return self.max_sleep
        return max(0.0, min(self.max_sleep, (next_due - self.clock()).total_seconds()))

    def _sleep(self, seconds):
        deadline = time.monotonic() + seconds
        while not self.state.stopping and time.monotonic() < deadline:
            time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))

    def _back_off(self, exc):
        self.state.failures += 1
        delay = min(MAX_BACKOFF, 0.5 * 2 ** (self.state.failures - 1))
        log.warning("scheduler: database error (%s); retrying in %.1fs", exc.__class__.__name__, delay)
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - the connection is already broken
            pass
        self._sleep(delay)
