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

from apps.eventstream import outbox

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
    _add_to_event_stream(changes, now, detail)
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


def _add_to_event_stream(changes, now, detail):
    """An outbox entry per change when the event stream is on (apps.eventstream): one
    query for the monitors' owners, one statement for the entries."""
    if not changes or not outbox.enabled():
        return
    owners = {monitor_id: (organization_id, project_id) for monitor_id, organization_id, project_id in
              Monitor.objects.filter(id__in=[c.monitor_id for c in changes])
              .values_list("id", "organization_id", "project_id")}
    outbox.add(outbox.monitor_entry(c.monitor_id, *owners[c.monitor_id], c.new_state, c.old_state, now,
                                    detail={"detail": detail} if detail else None)
               for c in changes if c.monitor_id in owners)
