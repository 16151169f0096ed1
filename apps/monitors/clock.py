"""The scheduler's monitor check (called from each tick of apps.executions.loop).

Time is a parameter. Two statements per tick, both on partial indexes, both conditional
on the state they change, so any number of schedulers decide each change once:

- up -> late: expected ping time passed, grace not yet (a conditional UPDATE; nobody is told);
- up/late -> down: grace passed. Overdue rows are claimed with FOR UPDATE SKIP LOCKED and
  changed in the same statement; their ``failure`` notifications are written in the same
  transaction, so a change and its one notification commit together or not at all.
"""

from __future__ import annotations

from django.db import connection, transaction

from .changes import StateChange, record_state_changes
from .models import Monitor

M = Monitor._meta.db_table
BATCH_SIZE = 500

LATE_SQL = (f"UPDATE {M} SET state = 'late', state_changed_at = %(now)s, updated_at = %(now)s "
            f"WHERE state = 'up' AND next_expected_at <= %(now)s AND deadline_at > %(now)s RETURNING id")
DOWN_SQL = (
    f"UPDATE {M} m SET state = 'down', state_changed_at = %(now)s, deadline_at = NULL, updated_at = %(now)s "
    f"FROM (SELECT id, state FROM {M} WHERE state IN ('up', 'late') AND deadline_at <= %(now)s "
    f"      ORDER BY deadline_at LIMIT %(n)s FOR UPDATE SKIP LOCKED) old "
    f"WHERE m.id = old.id AND m.state IN ('up', 'late') AND m.deadline_at <= %(now)s RETURNING m.id, old.state"
)
DOWN_DETAIL = "No ping arrived within the grace period."


def check_monitors(now, batch_size=BATCH_SIZE):
    """Move overdue monitors late or down at ``now``; returns (late, down) counts."""
    return mark_late(now), mark_down(now, batch_size)


def mark_late(now):
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(LATE_SQL, {"now": now})
            ids = [row[0] for row in cursor.fetchall()]
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
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(DOWN_SQL, {"now": now, "n": batch_size})
            return cursor.fetchall()
    # SQLite (the embedded mode): its transactions take the write lock as they begin, so the
    # rows read here are the rows changed; it has no FOR UPDATE, nor RETURNING from a join.
    claimed = list(Monitor.objects.filter(state__in=[Monitor.State.UP, Monitor.State.LATE], deadline_at__lte=now)
                   .order_by("deadline_at").values_list("id", "state")[:batch_size])
    Monitor.objects.filter(id__in=[pk for pk, _ in claimed]).update(
        state=Monitor.State.DOWN, state_changed_at=now, deadline_at=None, updated_at=now)
    return claimed
