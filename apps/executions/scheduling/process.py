"""The scheduler process: tick, publish, sweep, sleep; stop cleanly on SIGTERM/SIGINT.

One clock (docs/architecture.md): each tick reads the database's time once and decides
everything with it (claims, misfires, next runs, retries due, monitors); the sweeper reads
it again before it judges leases. The process's own clock only paces the loop (sleeps,
the dispatch-lag metric), so a skewed or jumping process clock cannot fire anything early
or move a schedule; its skew is reported (apps/observability/clock.py).

Only the claim decides whether a tick worked: a failure of the database there backs off.
Every other part of a tick (the tick hooks such as the monitors' check, the event relay,
retries, the sweep, the heartbeat) is guarded: its exception is logged and counted
(``cronsvc_loop_errors_total{part}``) and job scheduling goes on.
"""

import logging
import signal
import statistics
import threading
import time
from datetime import timedelta
from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import close_old_connections, connection
from django.db.utils import DatabaseError, InterfaceError, OperationalError

from apps.eventstream import relay
from apps.jobs.models import JobDue
from apps.sql import clock as database_clock

from . import broker_queues, publishing, sweeper

from .. import hooks
from .overload import OverloadGate
from ..routing import LOW, queue_for
from .tick import claim_due

log = logging.getLogger("cronsvc.scheduler")

MAX_BACKOFF = 30.0
#: While due jobs wait (the last batch was full), the tick's other parts (due retries, the
#: tick hooks, the event relay) run at most this often, not after every batch (their share
#: of a burst's time: bench/README.md, "Issue 38"); a retry still starts within about a
#: second, as it does between bursts.
BACKLOG_PARTS_INTERVAL = 1.0


@dataclass
class LoopState:
    stopping: bool = False
    last_sweep: float = 0.0
    failures: int = 0
    backlogged: bool = False  # the last batch was full: more jobs are due
    last_parts: float | None = None  # when the tick's other parts last ran (monotonic)


class SchedulerLoop:
    def __init__(self, *, batch_size=None, backlog_batch_size=None, max_sleep=None, sweep_interval=None, clock=None):
        """``clock``: () -> the database's time, for tests (time passed in); by default
        each tick reads it from the database (apps/sql/clock.py). ``backlog_batch_size``:
        the batch while due jobs wait (never below ``batch_size``)."""
        self.batch_size = batch_size or settings.SCHEDULER_BATCH_SIZE
        self.backlog_batch_size = max(self.batch_size, backlog_batch_size or settings.SCHEDULER_BACKLOG_BATCH_SIZE)
        self.max_sleep = settings.SCHEDULER_MAX_SLEEP if max_sleep is None else max_sleep
        self.sweep_interval = settings.SWEEPER_INTERVAL if sweep_interval is None else sweep_interval
        self.clock = clock
        self.reading = None  # the last read of the database's time
        self.state = LoopState()
        self._wake = threading.Event()  # set to stop: a sleeping loop wakes at once
        self.report = hooks.scheduler_report()  # observability's metrics and heartbeat
        self.heartbeat = self.report.heartbeat("scheduler")
        self.overload = OverloadGate()

    def install_signal_handlers(self):
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, self._request_stop)

    def _request_stop(self, signum, frame):
        log.info("scheduler: signal %s received, stopping after this tick", signum)
        self.state.stopping = True
        self._wake.set()

    def run(self, *, max_ticks=None):
        ticks = 0
        while not self.state.stopping and (max_ticks is None or ticks < max_ticks):
            ticks += 1
            try:
                busy = self.tick()
                self.state.failures = 0
                # Its query too: a session lost there (a cut connection) ended the scheduler.
                idle = None if busy else self._idle_sleep()
            except (OperationalError, InterfaceError, DatabaseError) as exc:
                self._back_off(exc)
                continue
            if idle is not None:
                self._sleep(idle)
        self._stop_heartbeat()
        log.info("scheduler: stopped")

    def tick(self):
        """One round; returns True when the batch was full (more work is waiting)."""
        close_old_connections()
        reading = self._read_clock()
        now = reading.at
        # at most every HEARTBEAT_INTERVAL seconds
        self._guarded("heartbeat", self.heartbeat.beat, now, skew_seconds=reading.skew_seconds)
        overloaded = self.overload.overloaded()
        # A burst is drained in larger batches: fewer transactions (and commits) a job.
        batch_size = self.backlog_batch_size if self.state.backlogged else self.batch_size
        result = claim_due(now, batch_size, overloaded)
        published = self._publish(result.to_publish)
        if result.claimed:
            self._log_tick(result, published)
        backlogged = self.state.backlogged = result.claimed >= batch_size
        # Dispatch first: while due jobs wait (a full batch) a tick publishes a few events,
        # the rest wait in the outbox until the burst has drained.
        batch = relay.BUSY_BATCH if backlogged else relay.BATCH
        relayed = self._other_parts(now, overloaded, batch) if self._parts_due(backlogged) else 0
        self._guarded("sweep", self._maybe_sweep)
        return backlogged or relayed >= batch

    def _parts_due(self, backlogged):
        """After every tick between bursts; during one, once per BACKLOG_PARTS_INTERVAL."""
        at = time.monotonic()
        if backlogged and self.state.last_parts is not None and at - self.state.last_parts < BACKLOG_PARTS_INTERVAL:
            return False
        self.state.last_parts = at
        return True

    def _other_parts(self, now, overloaded, relay_batch):
        """Due retries, the tick hooks and the event relay; returns how many events were relayed."""
        self._guarded("retries", self._publish_due_retries, now, overloaded)
        # e.g. heartbeat monitors past their grace go late/down (decided once)
        hooks.run_tick_hooks(now, on_error=self._hook_failed)
        return self._guarded("relay", self._relay_events, relay_batch) or 0

    def _read_clock(self):
        """The database's time (or the test's), its skew reported."""
        if self.clock is not None:
            self.reading = database_clock.Reading(at=self.clock(), skew_seconds=0.0)
            return self.reading
        self.reading = database_clock.reading()
        self.report.clock_skew(self.reading.skew_seconds)
        return self.reading

    def _now(self):
        """The database's time now, estimated from the last read (pacing and metrics only)."""
        return self.reading.now() if self.reading is not None else self._read_clock().at

    def _guarded(self, part, function, *args, **kwargs):
        """Call a part of the tick that must not stop scheduling: its exception is logged
        and counted, and None returned."""
        try:
            return function(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - logged and counted; scheduling goes on
            self._part_failed(part, exc)
            return None

    def _hook_failed(self, hook, exc):
        self._part_failed(hooks.tick_hook_part(hook), exc)

    def _part_failed(self, part, exc):
        log.error("scheduler: %s failed (%s: %s); job scheduling goes on", part, exc.__class__.__name__, exc,
                  exc_info=exc)
        self.report.loop_error(part)
        if isinstance(exc, (OperationalError, InterfaceError)):
            connection.close_if_unusable_or_obsolete()  # a lost session: the next part reconnects

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
        sent_at = self._now()
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
        now = self._read_clock().at  # fresh: a lease is judged at the database's time
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
        overdue = JobDue.objects.filter(next_run_at__isnull=False, next_run_at__lte=now - timedelta(seconds=1))
        return overdue.values("job_id")[:cap].count()

    def _stop_heartbeat(self):
        self.report.exited()
        try:
            self.heartbeat.stop()
        except (OperationalError, InterfaceError, DatabaseError):
            log.warning("scheduler: could not remove its heartbeat; it ages out")

    def _idle_sleep(self):
        """Sleep until the next job is due, but never longer than max_sleep."""
        next_due = (
            JobDue.objects.filter(next_run_at__isnull=False)
            .order_by("next_run_at").values_list("next_run_at", flat=True).first()
        )
        if next_due is None:
            return self.max_sleep
        return max(0.0, min(self.max_sleep, (next_due - self._now()).total_seconds()))

    def _sleep(self, seconds):
        """Wait ``seconds`` by the monotonic clock (an Event's wait: a stop wakes it, and
        no absolute deadline is computed from a clock that might jump)."""
        if not self.state.stopping and seconds > 0:
            self._wake.wait(seconds)

    def _back_off(self, exc):
        self.state.failures += 1
        delay = min(MAX_BACKOFF, 0.5 * 2 ** (self.state.failures - 1))
        log.warning("scheduler: database error (%s); retrying in %.1fs", exc.__class__.__name__, delay)
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - the connection is already broken
            pass
        self._sleep(delay)
