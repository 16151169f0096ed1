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

from apps.notifications.models import Event

from .alerts import notify
from .models import Monitor

M = Monitor._meta.db_table
BATCH_SIZE = 500

LATE_SQL = (f"UPDATE {M} SET state = 'late', state_changed_at = %(now)s, updated_at = %(now)s "
            f"WHERE state = 'up' AND next_expected_at <= %(now)s AND deadline_at > %(now)s")
DOWN_SQL = (
    f"UPDATE {M} SET state = 'down', state_changed_at = %(now)s, deadline_at = NULL, updated_at = %(now)s "
    f"WHERE id IN (SELECT id FROM {M} WHERE state IN ('up', 'late') AND deadline_at <= %(now)s "
    f"             ORDER BY deadline_at LIMIT %(n)s FOR UPDATE SKIP LOCKED) "
    f"AND state IN ('up', 'late') AND deadline_at <= %(now)s RETURNING id"
)


def check_monitors(now, batch_size=BATCH_SIZE):
    """Move overdue monitors late or down at ``now``; returns (late, down) counts."""
    with connection.cursor() as cursor:
        cursor.execute(LATE_SQL, {"now": now})
        late = cursor.rowcount
    return late, mark_down(now, batch_size)


def mark_down(now, batch_size=BATCH_SIZE):
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(DOWN_SQL, {"now": now, "n": batch_size})
            ids = [row[0] for row in cursor.fetchall()]
        if ids:
            monitors = list(Monitor.objects.filter(id__in=ids).select_related("project"))
            notify(Event.FAILURE, monitors, now, detail="No ping arrived within the grace period.")
    return len(ids)
