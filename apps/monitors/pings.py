"""Recording a ping: the hot path of the ping URLs, two SQL statements.

1. One SELECT reads the monitor by its ping id with what the checks need: its schedule,
   its organization's state and plan limits, and the pings metered this month.
2. One statement (a CTE) locks the monitor row, moves its state, stores the ping (with the
   duration since its start ping), and counts it in the month's usage.

The state is decided in SQL from the locked row, so a ping racing the scheduler's down
decision (apps.monitors.clock) waits for it and then sees ``down``: the recovery is noticed
exactly once. A state change is recorded (apps.monitors.changes) in the same transaction.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

import psycopg
from django.db import connection, transaction

from apps.accounts.models import Organization
from apps.billing.models import Plan, UsageMonth

from .changes import StateChange, record_state_changes
from .models import BODY_LIMIT, Monitor, Ping
from .schedule import deadline, next_expected

Target = namedtuple("Target", ["id", "organization_id", "state", "schedule_type", "cron_expression",
                               "interval_seconds", "timezone", "grace_seconds", "suspended", "per_minute",
                               "per_month", "quota", "month_pings"])

M, P, O, PL, U = (Monitor._meta.db_table, Ping._meta.db_table, Organization._meta.db_table, Plan._meta.db_table,
                  UsageMonth._meta.db_table)

FIND_SQL = (
    f"SELECT m.id, m.organization_id, m.state, m.schedule_type, m.cron_expression, m.interval_seconds, "
    f"m.timezone, m.grace_seconds, o.suspended, p.monitor_pings_per_minute, p.monitor_pings_per_month, "
    f"p.monthly_executions, COALESCE(u.pings, 0) "
    f"FROM {M} m JOIN {O} o ON o.id = m.organization_id JOIN {PL} p ON p.id = o.plan_id "
    f"LEFT JOIN {U} u ON u.organization_id = m.organization_id AND u.month = %(month)s "
    f"WHERE m.ping_id = %(ping_id)s"
)

def _new_state(old):
    return f"(CASE %(kind)s WHEN 'success' THEN 'up' WHEN 'fail' THEN 'down' ELSE {old}.state END)"


_NEW_STATE = _new_state("old")
# The quick path (``changing`` false) touches nothing when the locked row's state would
# change: the caller then records the ping again inside a transaction, with its change.
RECORD_SQL = f"""
WITH locked AS (
    SELECT id, state, last_start_at FROM {M} WHERE id = %(id)s FOR UPDATE
), old AS (
    SELECT * FROM locked WHERE %(changing)s OR {_new_state("locked")} = locked.state
), started AS (
    SELECT CASE WHEN %(rid)s = '' THEN (SELECT last_start_at FROM old)
                ELSE (SELECT s.created_at FROM {P} s WHERE s.monitor_id = %(id)s AND s.kind = 'start'
                      AND s.rid = %(rid)s ORDER BY s.id DESC LIMIT 1) END AS at
), dur AS (
    SELECT CASE WHEN %(kind)s <> 'start' AND at IS NOT NULL AND at <= %(now)s
                THEN (EXTRACT(EPOCH FROM (%(now)s - at)) * 1000)::bigint END AS ms FROM started
), upd AS (
    UPDATE {M} m SET
        state = {_NEW_STATE},
        state_changed_at = CASE WHEN {_NEW_STATE} <> old.state THEN %(now)s ELSE m.state_changed_at END,
        last_ping_at = %(now)s,
        last_ping_kind = %(kind)s,
        last_start_at = CASE WHEN %(kind)s = 'start' THEN %(now)s END,
        last_duration_ms = CASE WHEN %(kind)s = 'start' THEN m.last_duration_ms ELSE (SELECT ms FROM dur) END,
        next_expected_at = CASE %(kind)s WHEN 'success' THEN %(expected)s WHEN 'fail' THEN NULL
                                ELSE m.next_expected_at END,
        deadline_at = CASE %(kind)s WHEN 'success' THEN %(deadline)s WHEN 'fail' THEN NULL
                           ELSE LEAST(m.deadline_at, %(run_deadline)s) END,
        updated_at = %(now)s
    FROM old WHERE m.id = old.id
    RETURNING m.id
), ins AS (
    INSERT INTO {P} (monitor_id, kind, exit_code, rid, duration_ms, method, remote_addr, user_agent, body, created_at)
    SELECT old.id, %(kind)s, %(exit_code)s, %(rid)s, (SELECT ms FROM dur), %(method)s, %(remote_addr)s,
           %(user_agent)s, %(body)s, %(now)s FROM old
), usage AS (
    INSERT INTO {U} AS u (organization_id, month, runs, pings, quota, updated_at)
    SELECT %(org)s, %(month)s, 0, 1, %(quota)s, %(now)s FROM old
    ON CONFLICT (organization_id, month) DO UPDATE SET pings = u.pings + 1
)
SELECT locked.state, (SELECT ms FROM dur), (SELECT count(*) FROM upd),
       set_config('synchronous_commit', CASE WHEN {_new_state("locked")} = locked.state THEN 'off' ELSE 'on' END,
                  true)
FROM locked
"""


@dataclass(frozen=True)
class PingInput:
    kind: str  # success | start | fail
    exit_code: int | None = None
    rid: str = ""
    method: str = "GET"
    remote_addr: str = ""
    user_agent: str = ""
    body: str = ""


@dataclass(frozen=True)
class PingResult:
    old_state: str
    new_state: str
    duration_ms: int | None


def month_of(now):
    return now.date().replace(day=1)


def find(ping_id, now):
    """The Target of a ping id, or None."""
    row = _fetchone(FIND_SQL, {"month": month_of(now), "ping_id": ping_id})
    return Target(*row) if row else None


def new_state(kind, old_state):
    return {"success": Monitor.State.UP, "fail": Monitor.State.DOWN}.get(kind, old_state)


def changes_state(kind, state):
    return new_state(kind, state) != state


def record(target, ping, now):
    """Store ``ping`` for ``target`` at ``now`` (UTC); returns the PingResult (None when the
    monitor was deleted meanwhile).

    A ping that leaves the state as it is (the steady case: success on an up monitor) is
    one statement in autocommit, committed without waiting for the WAL flush
    (synchronous_commit off, set by the statement: a crash of PostgreSQL may lose the last
    fraction of a second of such pings, never a state change). A ping that changes the
    state, or finds it changed by the scheduler meanwhile, runs in a transaction with
    ``record_state_changes`` and a durable commit."""
    expected = None
    if ping.kind == Ping.Kind.SUCCESS:
        expected = next_expected(target.schedule_type, target.cron_expression, target.interval_seconds,
                                 target.timezone, now)
    params = {
        "id": target.id, "org": target.organization_id, "month": month_of(now), "quota": target.quota,
        "kind": ping.kind, "exit_code": ping.exit_code, "rid": ping.rid, "method": ping.method,
        "remote_addr": ping.remote_addr[:64], "user_agent": ping.user_agent[:200], "body": ping.body,
        "now": now, "expected": expected, "deadline": deadline(expected, target.grace_seconds), "changing": False,
        # a started run must end within the grace period, or the monitor goes down (as Healthchecks does)
        "run_deadline": deadline(now, target.grace_seconds),
    }
    if not changes_state(ping.kind, target.state):
        row = _execute(params)
        if row is None or row[2]:
            return row and PingResult(old_state=row[0], new_state=row[0], duration_ms=row[1])
    with transaction.atomic():
        row = _execute({**params, "changing": True})
        if row is None:
            return None
        result = PingResult(old_state=row[0], new_state=new_state(ping.kind, row[0]), duration_ms=row[1])
        if result.new_state != result.old_state:
            record_state_changes([StateChange(target.id, result.old_state, result.new_state)], now)
    return result


def _execute(params):
    return _fetchone(RECORD_SQL, params)


def _fetchone(sql, params):
    """The first row of ``sql``, run as a prepared statement on Django's connection (in its
    transaction, if any). Django binds parameters on the client, so PostgreSQL would plan
    these statements on every ping (half of their time); psycopg's server-side cursor
    prepares each once per connection."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, prepare=True)
        return cursor.fetchone()


def decode_body(raw: bytes) -> str:
    """The first BODY_LIMIT bytes as text (invalid UTF-8 replaced; NUL is not storable)."""
    return raw[:BODY_LIMIT].decode("utf-8", errors="replace").replace("\x00", "\ufffd")
