"""Recording a ping: the hot path of the ping URLs, one SQL statement.

The monitor's Target (its id, organization and schedule) comes from a per-process cache
(apps.monitors.targets), read from the database once. One statement (a CTE,
apps.monitors.queries.RECORD_PING) then locks the
monitor row, checks the Target's schedule is still the monitor's and the organization's
plan limits, moves the state, and stores the ping (with the duration since its start ping).
The month's usage is counted in the process and added to the database about once a second
(apps.monitors.usage): one row per organization would otherwise be every ping's lock.

The state is decided in SQL from the locked row, so a ping racing the scheduler's down
decision (apps.monitors.clock) waits for it and then sees ``down``: the recovery is noticed
exactly once. A state change is recorded (apps.monitors.changes) in the same transaction.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass

from django.db import transaction

from apps.observability import metrics
from apps.sql.modes import on_postgresql

from . import pings_portable, queries, usage
from .changes import StateChange, record_state_changes
from .models import BODY_LIMIT, Monitor, Ping
from .schedule import deadline, next_expected
from .targets import targets

Target = namedtuple("Target", ["id", "ping_id", "organization_id", "state", "schedule_type", "cron_expression",
                               "interval_seconds", "timezone", "grace_seconds"])

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
class PingRefusal:
    code: str  # organization_suspended | ping_quota_exceeded | ping_rate_limited
    per_minute: int
    per_month: int


def month_of(now):
    return now.date().replace(day=1)


def find(ping_id):
    """The Target of a ping id, or None; kept in the process's cache of targets."""
    return _cached(queries.target_by_ping_id(ping_id), ping_id)


def _cached(row, ping_id):
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
    """Store ``ping`` for ``target`` at ``now`` (UTC); returns the PingResult, a PingRefusal
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
        target = _cached(queries.target_by_id(target.id), ping_id)
        if target is None:
            break
        row, result = _record(target, ping, now, minute_hits)
    if row is None or target is None:
        targets.forget(ping_id)
        return None
    if row[3] is not None:
        return PingRefusal(row[3], per_minute=row[4], per_month=row[5])
    usage.count(target.organization_id, month_of(now), quota=row[6])
    metrics.PINGS.labels(ping.kind).inc()
    targets.put(ping_id, target._replace(state=result.new_state))
    return result


def _record(target, ping, now, minute_hits):
    """One try: (the statement's row or None when the monitor is gone, the PingResult)."""
    params = _params(target, ping, now, minute_hits)
    if not on_postgresql():
        return _record_portable(target, params, now)
    if not changes_state(ping.kind, target.state):
        row = queries.record_ping(params)
        if row is None or row[3] is not None or row[2]:
            return row, row and PingResult(old_state=row[0], new_state=row[0], duration_ms=row[1])
    with transaction.atomic():
        row = queries.record_ping({**params, "changing": True})
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


def decode_body(raw: bytes) -> str:
    """The first BODY_LIMIT bytes as text (invalid UTF-8 replaced; NUL is not storable)."""
    return raw[:BODY_LIMIT].decode("utf-8", errors="replace").replace("\x00", "\ufffd")
