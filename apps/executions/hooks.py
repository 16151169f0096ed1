"""What other apps do in the same transaction as a run's outcome.

Recording a run's outcome is where usage is metered (this app's own hook,
apps.executions.usage.metering, run after the others), where alerts and outgoing events
are decided (notifications) and where downstream jobs start (workflows). Each of
those must commit or roll back with the outcome itself — a crash in between must neither
lose nor double anything — so they run inside the recording transaction (a hook that
raises is logged and counted and undoes only its own writes: ``run_outcome_hooks``), as hooks that
the apps register from their ``AppConfig.ready()``. The executions app imports none of
them, and a hook sees only the plain facts below.

A hook is called with a list of ``RunOutcome`` (possibly many, when a worker records a group)
after the executions and the jobs' health have been updated, inside the transaction. It
must not call the network: anything that leaves the process goes through an outbox row
that a task sends after commit.

The same way, the apps above executions are told what they act on without being
imported: billing the counts each metered group added (it decides the quota warnings),
observability what a scheduler reports (its metrics and heartbeat).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from django.db import InterfaceError, OperationalError, transaction

from cronsvc.slot import Slot

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunOutcome:
    """One run moved on. ``status`` is the execution's new status (``queued`` means a retry
    waits until ``next_attempt_at``). ``attempt_number`` is the attempt just recorded, or
    None when no request was made (skipped, failed before sending). ``attempt_counted`` is
    True when a new Attempt row was stored by this transaction (what usage meters).
    ``moved`` is False for an attempt that did not move its run: a superseded one (its
    worker's lease token was no longer the run's: it counts for usage, and nothing else) or
    a cancelled run's acknowledgement."""

    execution_id: object
    job_id: object
    organization_id: object
    status: str
    finished_at: datetime
    attempt_number: int | None = None
    attempt_counted: bool = False
    error_kind: str = ""
    error_message: str = ""
    response_status: int | None = None
    duration_ms: int | None = None
    skip_reason: str = ""
    moved: bool = True


_hooks = []
_last_hooks = []


def _ignore_failure(name):
    return None


def on_outcomes(hook, *, last=False):
    """Register ``hook(outcomes)``; usable as a decorator. Registering twice is a no-op.

    ``last``: the hook runs after every other (in registration order among such hooks),
    for a hook whose writes lock rows that every worker's recording shares: taken last,
    those locks are held only until the commit, not while the other hooks run."""
    if hook not in _hooks and hook not in _last_hooks:
        (_last_hooks if last else _hooks).append(hook)
    return hook


def _all_hooks():
    return [*_hooks, *_last_hooks]


_hook_failed = Slot("outcome-hook error counter", "apps.observability", default=_ignore_failure)


def on_hook_failure(count):
    """Register ``count(hook name)``, called for each exception a hook raises (a metric)."""
    return _hook_failed.fill(count)


def hook_name(hook):
    """How a failing outcome hook is named in logs and ``cronsvc_outcome_hook_errors_total{hook}``."""
    return f"{getattr(hook, '__module__', '')}.{getattr(hook, '__qualname__', repr(hook))}"


def outcome_hook_names():
    """The names of the outcome hooks registered so far (their error series start at 0)."""
    return [hook_name(hook) for hook in _all_hooks()]


def run_outcome_hooks(outcomes):
    """Call every hook, in registration order (those registered ``last`` after the others),
    inside the caller's transaction, so what they write commits or rolls back with the
    outcome. A hook that raises (a bug in it, not the database failing) undoes only its
    own writes: it is logged and counted
    (``cronsvc_outcome_hook_errors_total``) and the outcome is recorded without it —
    rolling the outcome back would send the run again after its lease, and again, for as
    long as the hook fails (architecture invariant 6). The hooks share one savepoint;
    only after one raised does each run again in a savepoint of its own, to tell which.
    The database's own errors (deadlock, lost connection) are the caller's to retry."""
    outcomes = [outcome for outcome in outcomes if outcome is not None]
    if not outcomes:
        return
    hooks = _all_hooks()
    try:
        with transaction.atomic():
            for hook in hooks:
                hook(outcomes)
        return
    except (OperationalError, InterfaceError):
        raise
    except Exception:  # noqa: BLE001 - which hook failed is found below
        pass
    for hook in hooks:
        try:
            with transaction.atomic():
                hook(outcomes)
        except (OperationalError, InterfaceError):
            raise
        except Exception:  # noqa: BLE001 - one hook's bug never stops the recording
            name = hook_name(hook)
            log.exception("outcome hook %s failed on %d runs; recorded without it", name, len(outcomes))
            try:
                _hook_failed.get()(name)
            except Exception:  # noqa: BLE001
                log.exception("counting a hook's failure failed")


# --- the scheduler's tick

_tick_hooks = []


def on_tick(hook):
    """Register ``hook(now)``, called once per scheduler tick after the due jobs and
    retries are published (monitors decide there which heartbeats are late or down).
    Registering twice is a no-op; usable as a decorator."""
    if hook not in _tick_hooks:
        _tick_hooks.append(hook)
    return hook


def tick_hook_part(hook):
    """The part of a scheduler tick a tick hook is (``cronsvc_loop_errors_total{part}``)."""
    return f"hook:{getattr(hook, '__module__', '?')}"


def tick_hook_parts():
    """The parts of the tick hooks registered so far."""
    return [tick_hook_part(hook) for hook in _tick_hooks]


def run_tick_hooks(now, on_error=None):
    """Call every tick hook in registration order; each manages its own transactions.
    With ``on_error(hook, exc)`` a hook that raises is handed there and the next hook is
    called (the scheduler's loop logs and counts it: a hook never stops scheduling)."""
    for hook in list(_tick_hooks):
        if on_error is None:
            hook(now)
            continue
        try:
            hook(now)
        except Exception as exc:  # noqa: BLE001 - the caller decides what a failure means
            on_error(hook, exc)


# --- usage metered (billing's quota warnings)

_usage_metered = Slot("usage-metered hook", "apps.billing")


def on_usage_metered(hook):
    """Register ``hook(counts)``, called by the metering (apps.executions.usage.metering)
    inside the recording transaction: ``counts`` is [(organization id, month, runs before,
    runs after, quota)], one per organization and month the group counted (billing warns
    when a quota threshold lies between before and after). One hook: registering another
    replaces it."""
    return _usage_metered.fill(hook)


def usage_metered(counts):
    _usage_metered.get()(counts)


# --- what a scheduler process reports (observability)


def _ignore(*args):
    return None


class _NoBeat:
    def __init__(self, kind):
        self.kind = kind

    def beat(self, now=None, *, force=False, skew_seconds=None):
        return False

    def stop(self):
        return None


@dataclass(frozen=True)
class SchedulerReport:
    """What a scheduler tells the operators, as plain callables the loop takes once, when
    it starts (nothing looked up per tick). The defaults tell nobody; observability
    registers its metrics and heartbeat."""

    dispatched: Callable = _ignore  # (lags in seconds, ids published): one tick's dispatch
    retries_published: Callable = _ignore  # (count)
    swept: Callable = _ignore  # (leases recovered, lost messages republished)
    backlog: Callable = _ignore  # (jobs due over a second and not claimed yet)
    exited: Callable = _ignore  # (): the process stops
    clock_skew: Callable = _ignore  # (seconds): this process's clock minus the database's
    loop_error: Callable = _ignore  # (part): a part of a tick raised; the loop went on
    heartbeat: Callable = _NoBeat  # (kind) -> an object with beat() and stop()


_scheduler_report = Slot("scheduler report", "apps.observability", default=SchedulerReport())


def on_scheduler_report(report):
    """Register the SchedulerReport. One report: registering another replaces it."""
    return _scheduler_report.fill(report)


def scheduler_report():
    return _scheduler_report.get()
