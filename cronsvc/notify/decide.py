"""One alert per state change: what a job's new runs mean for its alert state.

Pure: the caller locks the job's state row, passes it in with the job's health as the
recording transaction left it, and stores what comes back. A job failing every minute
produces one ``failure`` alert (then reminders, if asked), not one per run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from cronsvc.statuses import FAILED, SUCCEEDED


@dataclass(frozen=True)
class AlertFlags:
    failure_notified: bool = False
    disabled_notified: bool = False
    notified_at: datetime | None = None
    last_reminder_at: datetime | None = None


@dataclass(frozen=True)
class JobHealth:
    consecutive_failures: int
    enabled: bool
    auto_disabled: bool


@dataclass(frozen=True)
class Rule:
    failure_threshold: int = 1
    notify_recovery: bool = True
    notify_disabled: bool = True


def decide(flags: AlertFlags, statuses: list[str], health: JobHealth, rule: Rule,
           now: datetime) -> tuple[AlertFlags, list[tuple[str, int]]]:
    """(new flags, [(event, index of the run it is about)]) for a job's runs, in order.
    ``disabled`` is also returned when the rule mutes its alert, so the caller can still
    emit the ``job.disabled`` event; the caller drops muted alerts with ``muted``."""
    events = []
    successes = [i for i, status in enumerate(statuses) if status == SUCCEEDED]
    if successes and flags.failure_notified:
        flags = replace(flags, failure_notified=False, notified_at=None, last_reminder_at=None)
        events.append(("recovery", successes[-1]))
    last = len(statuses) - 1
    if (statuses and statuses[last] in FAILED and not flags.failure_notified
            and health.consecutive_failures >= max(1, rule.failure_threshold)):
        flags = replace(flags, failure_notified=True, notified_at=now, last_reminder_at=now)
        events.append(("failure", last))
    if health.auto_disabled and not health.enabled and not flags.disabled_notified:
        flags = replace(flags, disabled_notified=True)
        events.append(("disabled", last))
    elif health.enabled and flags.disabled_notified:
        flags = replace(flags, disabled_notified=False)  # re-enabled: a new auto-disable alerts again
    return flags, events


def muted(event: str, rule: Rule) -> bool:
    return (event == "recovery" and not rule.notify_recovery) or (event == "disabled" and not rule.notify_disabled)


def reminder_due(flags: AlertFlags, reminder_hours: int | None, now: datetime) -> bool:
    if not (flags.failure_notified and reminder_hours):
        return False
    since = flags.last_reminder_at or flags.notified_at
    return since is None or (now - since).total_seconds() >= reminder_hours * 3600
