"""The monitors app's hand-written SQL (PostgreSQL): the ping's one statement, the
scheduler's late and down changes, the ping usage upsert and the retention purge. The
logic around them is in pings.py, clock.py, usage.py and retention.py, which also hold the
ORM paths of the embedded mode's SQLite."""

import weakref

import psycopg
from django.conf import settings
from django.db import connection

from apps.accounts.models import Organization
from apps.executions.models import UsageMonth
from apps.plans.models import Plan
from apps.sql.bulk import Unnest
from apps.sql.modes import on_postgresql

from .models import Monitor, Ping

M, P, O, PL, U = (Monitor._meta.db_table, Ping._meta.db_table, Organization._meta.db_table, Plan._meta.db_table,
                  UsageMonth._meta.db_table)

# --- pings (apps.monitors.pings) ---------------------------------------------------------

_FIND = (f"SELECT id, ping_id, organization_id, state, schedule_type, cron_expression, interval_seconds, "
         f"timezone, grace_seconds FROM {M}")
#: A monitor's Target columns (apps.monitors.pings.Target), by its ping id or by its id.
FIND_BY_PING_ID = f"{_FIND} WHERE ping_id = %(ping_id)s"
FIND_BY_ID = f"{_FIND} WHERE id = %(id)s"


def _new_state(old):
    return f"(CASE %(kind)s WHEN 'success' THEN 'up' WHEN 'fail' THEN 'down' ELSE {old}.state END)"


_NEW_STATE = _new_state("old")
# ``current``: the schedule the caller computed the next expected ping from is still the
# monitor's (a Target may come from the cache). The quick path (``changing`` false) touches
# nothing when the locked row's state would change: the caller then records the ping again
# inside a transaction, with its change. A refusal (plan limits) touches nothing either.
RECORD_PING = f"""
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


def target_by_ping_id(ping_id):
    """The Target columns of the monitor with this ping id, or None."""
    return _fetchone(FIND_BY_PING_ID, {"ping_id": ping_id})


def target_by_id(monitor_id):
    """The Target columns of the monitor with this id, or None."""
    return _fetchone(FIND_BY_ID, {"id": monitor_id})


def record_ping(params):
    """RECORD_PING's one row for ``params`` (apps.monitors.pings._params), or None when the
    monitor is gone: one statement, in the caller's transaction if any."""
    return _fetchone(RECORD_PING, params)


def _fetchone(sql, params):
    """The first row of ``sql``, run as a prepared statement on Django's connection (in its
    transaction, if any). Django binds parameters on the client, so PostgreSQL would plan these
    statements on every ping; psycopg's server-side cursor prepares each once per connection.
    PostgreSQL would still plan a prepared statement afresh for each set of parameters (a
    "custom plan", most of this one's time: bench/README.md, "Figures behind the code") as long
    as it guesses the generic plan costlier, so its connections here always use the generic
    plan: the statements look rows up by key, whatever the parameters. Behind a transaction
    pooler (DATABASE_TRANSACTION_POOLING) nothing is prepared and no session is told anything:
    the next transaction may run on another client's session."""
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    if not on_postgresql():
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()
    raw = connection.connection
    with connection.wrap_database_errors, psycopg.Cursor(raw) as cursor:
        own_session = not settings.DATABASE_TRANSACTION_POOLING
        if own_session and raw not in _generic_plans and not connection.in_atomic_block:  # (a rollback would undo it)
            cursor.execute("SET plan_cache_mode = force_generic_plan")  # only prepared statements plan by it
            _generic_plans.add(raw)
        cursor.execute(sql, params, prepare=True)
        return cursor.fetchone()


_generic_plans = weakref.WeakSet()  # the connections told to use generic plans

# --- the scheduler's check (apps.monitors.clock) -----------------------------------------

#: A new monitor has a deadline only once a /start came: start + grace.
_CAN_GO_DOWN = ", ".join(f"'{state}'" for state in Monitor.CAN_GO_DOWN)
MARK_LATE = (f"UPDATE {M} SET state = 'late', state_changed_at = %(now)s, updated_at = %(now)s "
             f"WHERE state = 'up' AND next_expected_at <= %(now)s AND deadline_at > %(now)s RETURNING id")
MARK_DOWN = (
    f"UPDATE {M} m SET state = 'down', state_changed_at = %(now)s, deadline_at = NULL, updated_at = %(now)s "
    f"FROM (SELECT id, state FROM {M} WHERE state IN ({_CAN_GO_DOWN}) AND deadline_at <= %(now)s "
    f"      ORDER BY deadline_at LIMIT %(n)s FOR UPDATE SKIP LOCKED) old "
    f"WHERE m.id = old.id AND m.state IN ({_CAN_GO_DOWN}) AND m.deadline_at <= %(now)s RETURNING m.id, old.state"
)


def mark_late(now):
    """Turn late the up monitors whose expected ping time passed at ``now``, grace not yet;
    returns their ids."""
    with connection.cursor() as cursor:
        cursor.execute(MARK_LATE, {"now": now})
        return [row[0] for row in cursor.fetchall()]


def mark_down(now, batch_size):
    """Turn down at most ``batch_size`` up, late or started new monitors whose grace passed at ``now``,
    skipping those another transaction holds; returns (id, state before) of each."""
    with connection.cursor() as cursor:
        cursor.execute(MARK_DOWN, {"now": now, "n": batch_size})
        return cursor.fetchall()


# --- ping usage (apps.monitors.usage) ----------------------------------------------------

#: Pings to add per (organization, month), with the plan's quota for a new month's row.
PINGS = Unnest([("organization_id", "uuid"), ("month", "date"), ("pings", "bigint"), ("quota", "bigint")],
               alias="c", placeholder="%s")
ADD_PINGS = f"""
INSERT INTO {U} AS u (organization_id, month, runs, pings, quota, updated_at)
SELECT c.organization_id, c.month, 0, c.pings, c.quota, %s
FROM {PINGS.source}
JOIN {O} o ON o.id = c.organization_id  -- an organization deleted meanwhile: dropped
ON CONFLICT (organization_id, month) DO UPDATE SET pings = u.pings + EXCLUDED.pings, updated_at = EXCLUDED.updated_at
"""


def add_pings(rows, now):
    """Add each row's pings (organization id, month, pings, quota) to its UsageMonth, in one
    statement; ``now`` is the rows' updated_at."""
    with connection.cursor() as cursor:
        cursor.execute(ADD_PINGS, [now, *PINGS.params(rows)])


# --- retention (apps.monitors.retention) -------------------------------------------------

PURGE_PINGS = (
    f"DELETE FROM {P} WHERE id IN ("
    f" SELECT p.id FROM {P} p JOIN {M} m ON m.id = p.monitor_id JOIN {O} o ON o.id = m.organization_id"
    f" JOIN {PL} pl ON pl.id = o.plan_id"
    f" WHERE p.created_at < %(now)s - make_interval(days => pl.retention_days) LIMIT %(n)s)"
)


def purge_expired_pings(now, batch_size):
    """Delete at most ``batch_size`` pings older than their plan's retention at ``now``;
    returns how many."""
    with connection.cursor() as cursor:
        cursor.execute(PURGE_PINGS, {"now": now, "n": batch_size})
        return cursor.rowcount
