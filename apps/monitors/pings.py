"""Recording a ping: the hot path of the ping URLs, one SQL statement.

The monitor's Target (its id, organization and schedule) comes from a per-process cache
(apps.monitors.targets), read from the database once. One statement (a CTE) then locks the
monitor row, checks the Target's schedule is still the monitor's and the organization's
plan limits, moves the state, and stores the ping (with the duration since its start ping).
The month's usage is counted in the process and added to the database about once a second
(apps.monitors.usage): one row per organization would otherwise be every ping's lock.

The state is decided in SQL from the locked row, so a ping racing the scheduler's down
decision (apps.monitors.clock) waits for it and then sees ``down``: the recovery is noticed
exactly once. A state change is recorded (apps.monitors.changes) in the same transaction.
"""

from __future__ import annotations

import weakref
from collections import namedtuple
from dataclasses import dataclass

import psycopg
from django.db import connection, transaction

from apps.accounts.models import Organization
from apps.billing.models import Plan, UsageMonth

from . import pings_portable, usage
from .changes import StateChange, record_state_changes
from .models import BODY_LIMIT, Monitor, Ping
from .schedule import deadline, next_expected
from .targets import targets

Target = namedtuple("Target", ["id", "ping_id", "organization_id", "state", "schedule_type", "cron_expression",
                               "interval_seconds", "timezone", "grace_seconds"])

M, P, O, PL, U = (Monitor._meta.db_table, Ping._meta.db_table, Organization._meta.db_table, Plan._meta.db_table,
                  UsageMonth._meta.db_table)

FIND_SQL = (f"SELECT id, ping_id, organization_id, state, schedule_type, cron_expression, interval_seconds, "
            f"timezone, grace_seconds FROM {M}")


def _new_state(old):
    return f"(CASE %(kind)s WHEN 'success' THEN 'up' WHEN 'fail' THEN 'down' ELSE {old}.state END)"


_NEW_STATE = _new_state("old")
# ``current``: the schedule the caller computed the next expected ping from is still the
# monitor's (a Target may come from the cache). The quick path (``changing`` false) touches
# nothing when the locked row's state would change: the caller then records the ping again
# inside a transaction, with its change. A refusal (plan limits) touches nothing either.
RECORD_SQL = f"""
WITH locked AS (
    SELECT id, state, last_start_at,
           (schedule_type = %(schedule_type)s AND cron_expression = %(cron_expression)s
            AND interval_seconds IS NOT DISTINCT FROM %(interval_seconds)s AND timezone = %(timezone)s
            AND grace_seconds = %(grace_seconds)s) AS current
    FROM {M} WHERE id = %(id)s FOR UPDATE
), limits AS (
    SELECT o.suspended, p.monitor_pings_per_minute AS per_minute, p.monitor_pings_per_month AS per_month,
           p.monthly_executions AS quota, COALESCE(u.pings, 0) + %(pending)s AS month_pings
    FROM {O} o JOIN {PL} p ON p.id = o.plan_id
    LEFT JOIN {U} u ON u.organization_id = o.id AND u.month = %(month)s
    WHERE o.id = %(org)s
), verdict AS (
    SELECT CASE WHEN NOT locked.current THEN 'stale'
                WHEN limits.suspended THEN 'organization_suspended'
                WHEN limits.month_pings >= limits.per_month THEN 'ping_quota_exceeded'
                WHEN %(minute_hits)s > limits.per_minute THEN 'ping_rate_limited' END AS refusal
    FROM locked, limits
), old AS (
    SELECT locked.* FROM locked, verdict
    WHERE verdict.refusal IS NULL AND (%(changing)s OR {_new_state("locked")} = locked.state)
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
)
SELECT locked.state, (SELECT ms FROM dur), (SELECT count(*) FROM upd), verdict.refusal, limits.per_minute,
       limits.per_month, limits.quota,
       set_config('synchronous_commit', CASE WHEN {_new_state("locked")} = locked.state THEN 'off' ELSE 'on' END,
                  true)
FROM locked, verdict, limits
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


@dataclass(frozen=True)
class Refusal:
    code: str  # organization_suspended | ping_quota_exceeded | ping_rate_limited
    per_minute: int
    per_month: int


def month_of(now):
    return now.date().replace(day=1)


def find(ping_id):
    """The Target of a ping id, or None; kept in the process's cache of targets."""
    return _find({"ping_id": ping_id}, ping_id)


def _find(params, ping_id):
    where = "ping_id = %(ping_id)s" if "ping_id" in params else "id = %(id)s"
    row = _fetchone(f"{FIND_SQL} WHERE {where}", params)
    target = Target(*row) if row else None
    targets.put(ping_id or (target and target.ping_id), target)
    return target


def target_of(ping_id):
    """The Target of a ping id, from the cache when this process has seen it: a monitor's
    organization never changes, and the ping's statement checks that its schedule is still
    the one the Target says (``record`` looks again when it is not)."""
    return targets.get(ping_id) or find(ping_id)


def new_state(kind, old_state):
    return {"success": Monitor.State.UP, "fail": Monitor.State.DOWN}.get(kind, old_state)


def changes_state(kind, state):
    return new_state(kind, state) != state


def record(target, ping, now, *, minute_hits=0):
    """Store ``ping`` for ``target`` at ``now`` (UTC); returns the PingResult, a Refusal
    (the plan's limits; ``minute_hits``: the organization's pings this minute, counted by
    the caller), or None when the monitor was deleted meanwhile.

    A ping that leaves the state as it is (the steady case: success on an up monitor) is
    one statement in autocommit, committed without waiting for the WAL flush
    (synchronous_commit off, set by the statement: a crash of PostgreSQL may lose the last
    fraction of a second of such pings, never a state change). A ping that changes the
    state, or finds it changed by the scheduler meanwhile, runs in a transaction with
    ``record_state_changes`` and a durable commit. Counted pings reach the month's usage
    through apps.monitors.usage."""
    ping_id = target.ping_id
    row, result = _record(target, ping, now, minute_hits)
    while row is not None and row[3] == "stale":  # the schedule changed since the Target was read
        target = _find({"id": target.id}, ping_id)
        if target is None:
            break
        row, result = _record(target, ping, now, minute_hits)
    if row is None or target is None:
        targets.forget(ping_id)
        return None
    if row[3] is not None:
        return Refusal(row[3], per_minute=row[4], per_month=row[5])
    usage.count(target.organization_id, month_of(now), quota=row[6])
    targets.put(ping_id, target._replace(state=result.new_state))
    return result


def _record(target, ping, now, minute_hits):
    """One try: (the statement's row or None when the monitor is gone, the PingResult)."""
    params = _params(target, ping, now, minute_hits)
    if connection.vendor != "postgresql":
        return _record_portable(target, params, now)
    if not changes_state(ping.kind, target.state):
        row = _fetchone(RECORD_SQL, params)
        if row is None or row[3] is not None or row[2]:
            return row, row and PingResult(old_state=row[0], new_state=row[0], duration_ms=row[1])
    with transaction.atomic():
        row = _fetchone(RECORD_SQL, {**params, "changing": True})
        if row is None or row[3] is not None:
            return row, None
        result = PingResult(old_state=row[0], new_state=new_state(ping.kind, row[0]), duration_ms=row[1])
        if result.new_state != result.old_state:
            record_state_changes([StateChange(target.id, result.old_state, result.new_state)], now)
    return row, result


def _record_portable(target, params, now):
    def on_change(old, new):
        record_state_changes([StateChange(target.id, old, new)], now)

    row = pings_portable.record_row(params, new_state=new_state, on_change=on_change)
    if row is None or row[3] is not None:
        return row, None
    return row, PingResult(old_state=row[0], new_state=new_state(params["kind"], row[0]), duration_ms=row[1])


def _params(target, ping, now, minute_hits):
    expected = None
    if ping.kind == Ping.Kind.SUCCESS:
        expected = next_expected(target.schedule_type, target.cron_expression, target.interval_seconds,
                                 target.timezone, now)
    month = month_of(now)
    return {
        "id": target.id, "org": target.organization_id, "month": month,
        "pending": usage.pending(target.organization_id, month), "minute_hits": minute_hits,
        "schedule_type": target.schedule_type, "cron_expression": target.cron_expression,
        "interval_seconds": target.interval_seconds, "timezone": target.timezone,
        "grace_seconds": target.grace_seconds,
        "kind": ping.kind, "exit_code": ping.exit_code, "rid": ping.rid, "method": ping.method,
        "remote_addr": ping.remote_addr[:64], "user_agent": ping.user_agent[:200], "body": ping.body,
        "now": now, "expected": expected, "deadline": deadline(expected, target.grace_seconds), "changing": False,
        # a started run must end within the grace period, or the monitor goes down (as Healthchecks does)
        "run_deadline": deadline(now, target.grace_seconds),
    }


def _fetchone(sql, params):
    """The first row of ``sql``, run as a prepared statement on Django's connection (in its
    transaction, if any). Django binds parameters on the client, so PostgreSQL would plan
    these statements on every ping; psycopg's server-side cursor prepares each once per
    connection. PostgreSQL would still plan a prepared statement afresh for each set of
    parameters (a "custom plan", 0.5 ms of this one's 0.7 ms) as long as it guesses the
    generic plan costlier, so its connections here always use the generic plan: the
    statements look rows up by key, whatever the parameters."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()
    raw = connection.connection
    with connection.wrap_database_errors, psycopg.Cursor(raw) as cursor:
        if raw not in _generic_plans and not connection.in_atomic_block:  # (a rollback would undo it)
            cursor.execute("SET plan_cache_mode = force_generic_plan")  # only prepared statements plan by it
            _generic_plans.add(raw)
        cursor.execute(sql, params, prepare=True)
        return cursor.fetchone()


_generic_plans = weakref.WeakSet()  # the connections told to use generic plans


def decode_body(raw: bytes) -> str:
    """The first BODY_LIMIT bytes as text (invalid UTF-8 replaced; NUL is not storable)."""
    return raw[:BODY_LIMIT].decode("utf-8", errors="replace").replace("\x00", "\ufffd")
