"""The scheduler's monitor check (called from each tick of apps.executions.scheduling.process).

Time is a parameter: the tick's ``now``, the database's time (docs/architecture.md, "One
clock"), so a scheduler with a skewed clock never turns a monitor late or down early. A
failure here is logged and counted by the loop (``cronsvc_loop_errors_total``) and never
stops job scheduling. Two statements per tick, both on partial indexes, both conditional
on the state they change, so any number of schedulers decide each change once:

- up -> late: expected ping time passed, grace not yet (a conditional UPDATE; nobody is told);
- up/late -> down: grace passed (and new -> down: a /start's run did not end within the grace). Overdue rows are claimed with FOR UPDATE SKIP LOCKED and
  changed in the same statement; their ``failure`` notifications are written in the same
  transaction, so a change and its one notification commit together or not at all.
"""

from __future__ import annotations

from django.db import transaction

from apps.sql.modes import on_postgresql

from . import queries
from .changes import StateChange, record_state_changes
from .models import Monitor

BATCH_SIZE = 500
DOWN_DETAIL = "No ping arrived within the grace period."


def check_monitors(now, batch_size=BATCH_SIZE):
    """Move overdue monitors late or down at ``now``; returns (late, down) counts."""
    return mark_late(now), mark_down(now, batch_size)


def mark_late(now):
    with transaction.atomic():
        ids = queries.mark_late(now)
        record_state_changes([StateChange(pk, Monitor.State.UP, Monitor.State.LATE) for pk in ids], now)
    return len(ids)


def mark_down(now, batch_size=BATCH_SIZE):
    with transaction.atomic():
        claimed = _claim_down(now, batch_size)
        changes = [StateChange(pk, old, Monitor.State.DOWN) for pk, old in claimed]
        record_state_changes(changes, now, detail=DOWN_DETAIL)
    return len(changes)


def _claim_down(now, batch_size):
    """(id, state before) of the overdue monitors turned down, in the caller's transaction."""
    if on_postgresql():
        return queries.mark_down(now, batch_size)
    # SQLite (the embedded mode): its transactions take the write lock as they begin, so the
    # rows read here are the rows changed; it has no FOR UPDATE, nor RETURNING from a join.
    claimed = list(Monitor.objects.filter(state__in=Monitor.CAN_GO_DOWN, deadline_at__lte=now)
                   .order_by("deadline_at").values_list("id", "state")[:batch_size])
    Monitor.objects.filter(id__in=[pk for pk, _ in claimed]).update(
        state=Monitor.State.DOWN, state_changed_at=now, deadline_at=None, updated_at=now)
    return claimed
