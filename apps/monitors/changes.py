"""The one place every monitor state change is recorded.

Whoever changes a monitor's state (a ping, the scheduler's late/down check, pause, resume,
a schedule edit) calls ``record_state_changes`` in the transaction that made the change,
with the state before and after. Here a change becomes its notification (apps.monitors.
alerts: down and recovery only); anything else that must follow every change exactly once
(an event stream's outbox row, say) belongs here too, so it commits with the change.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from .alerts import event_for, notify
from .models import Monitor


@dataclass(frozen=True)
class StateChange:
    monitor_id: object
    old_state: str
    new_state: str


def record_state_changes(changes, now, *, detail=""):
    """Record ``changes`` (StateChange, each a real change) made at ``now`` in the current
    transaction; returns the notification rows queued."""
    by_event = defaultdict(list)
    for change in changes:
        event = event_for(change.old_state, change.new_state)
        if event is not None:
            by_event[event].append(change.monitor_id)
    rows = []
    for event, ids in by_event.items():
        monitors = list(Monitor.objects.filter(id__in=ids).select_related("project"))
        rows += notify(event, monitors, now, detail=detail)
    return rows
