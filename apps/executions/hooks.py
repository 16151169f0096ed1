"""What other apps do in the same transaction as a run's outcome.

Recording a run's outcome is where usage is metered (billing), where alerts and outgoing
events are decided (notifications) and where downstream jobs start (workflows). Each of
those must commit or roll back with the outcome itself — a crash in between must neither
lose nor double anything — so they run inside the recording transaction, as hooks that
the apps register from their ``AppConfig.ready()``. The executions app imports none of
them, and a hook sees only the plain facts below.

A hook is called with a list of ``Outcome`` (possibly many, when a worker records a group)
after the executions and the jobs' health have been updated, inside the transaction. It
must not call the network: anything that leaves the process goes through an outbox row
that a task sends after commit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    """One run moved on. ``status`` is the execution's new status (``queued`` means a retry
    waits until ``next_attempt_at``). ``attempt_number`` is the attempt just recorded, or
    None when no request was made (skipped, failed before sending). ``attempt_counted`` is
    True when a new Attempt row was stored by this transaction (what usage meters).
    ``moved`` is False for an attempt stored after its run's lease was taken back: the
    attempt counts, but the run's state did not change."""

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


def on_outcomes(hook):
    """Register ``hook(outcomes)``; usable as a decorator. Registering twice is a no-op."""
    if hook not in _hooks:
        _hooks.append(hook)
    return hook


def run_outcome_hooks(outcomes):
    """Call every hook, in registration order, inside the caller's transaction. A hook that
    raises rolls the outcome back with it: the run is then recorded again later (lease
    recovery), never half-recorded."""
    outcomes = [outcome for outcome in outcomes if outcome is not None]
    if not outcomes:
        return
    for hook in list(_hooks):
        hook(outcomes)


# --- the scheduler's tick

_tick_hooks = []


def on_tick(hook):
    """Register ``hook(now)``, called once per scheduler tick after the due jobs and
    retries are published (monitors decide there which heartbeats are late or down).
    Registering twice is a no-op; usable as a decorator."""
    if hook not in _tick_hooks:
        _tick_hooks.append(hook)
    return hook


def run_tick_hooks(now):
    """Call every tick hook in registration order; each manages its own transactions."""
    for hook in list(_tick_hooks):
        hook(now)
