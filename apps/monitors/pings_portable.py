"""Recording a ping with the ORM, for databases other than PostgreSQL (the embedded mode's
SQLite): the same decisions as apps.monitors.pings's statement, in one transaction.

SQLite takes its write lock when the transaction begins (the settings make transactions
IMMEDIATE), so the monitor row read here cannot change before the write: the lock that
PostgreSQL's ``FOR UPDATE`` takes on one row, SQLite takes on the database.
"""

from django.db import transaction

from apps.accounts.models import Organization
from apps.executions.models import UsageMonth

from .models import Monitor, Ping

SCHEDULE = ("schedule_type", "cron_expression", "interval_seconds", "timezone", "grace_seconds")


def record_row(params, *, new_state, on_change):
    """The row the PostgreSQL statement returns: (old state, duration ms, rows updated,
    refusal, per minute, per month, quota), or None when the monitor is gone. ``on_change
    (old, new)`` runs in the transaction when the state changes."""
    with transaction.atomic():
        monitor = Monitor.objects.select_for_update().filter(pk=params["id"]).first()
        if monitor is None:
            return None
        plan = Organization.objects.select_related("plan").get(pk=params["org"])
        limits = (plan.plan.monitor_pings_per_minute, plan.plan.monitor_pings_per_month, plan.plan.monthly_executions)
        refusal = _refusal(monitor, plan, params, limits)
        if refusal is not None:
            return (monitor.state, None, 0, refusal, *limits)
        old, new = monitor.state, new_state(params["kind"], monitor.state)
        duration = _duration(monitor, params)
        _apply(monitor, params, new, duration)
        Ping.objects.create(monitor=monitor, kind=params["kind"], exit_code=params["exit_code"], rid=params["rid"],
                            duration_ms=duration, method=params["method"], remote_addr=params["remote_addr"],
                            user_agent=params["user_agent"], body=params["body"], created_at=params["now"])
        if new != old:
            on_change(old, new)
    return (old, duration, 1, None, *limits)


def _refusal(monitor, organization, params, limits):
    per_minute, per_month, _ = limits
    if any(getattr(monitor, name) != params[name] for name in SCHEDULE):
        return "stale"
    if organization.suspended:
        return "organization_suspended"
    stored = UsageMonth.objects.filter(organization_id=params["org"], month=params["month"]).values_list(
        "pings", flat=True).first() or 0
    if stored + params["pending"] >= per_month:
        return "ping_quota_exceeded"
    if params["minute_hits"] > per_minute:
        return "ping_rate_limited"
    return None


def _duration(monitor, params):
    if params["kind"] == Ping.Kind.START:
        return None
    started = monitor.last_start_at
    if params["rid"]:
        started = (Ping.objects.filter(monitor=monitor, kind=Ping.Kind.START, rid=params["rid"]).order_by("-id")
                   .values_list("created_at", flat=True).first())
    if started is None or started > params["now"]:
        return None
    return int((params["now"] - started).total_seconds() * 1000)


def _apply(monitor, params, new, duration):
    kind, now = params["kind"], params["now"]
    if new != monitor.state:
        monitor.state_changed_at = now
    monitor.state = new
    monitor.last_ping_at, monitor.last_ping_kind = now, kind
    monitor.last_start_at = now if kind == Ping.Kind.START else None
    if kind != Ping.Kind.START:
        monitor.last_duration_ms = duration
    if kind == Ping.Kind.SUCCESS:
        monitor.next_expected_at, monitor.deadline_at = params["expected"], params["deadline"]
    elif kind == Ping.Kind.FAIL:
        monitor.next_expected_at = monitor.deadline_at = None
    else:  # a start: the run must end within the grace (LEAST in the PostgreSQL statement)
        monitor.deadline_at = min(d for d in (monitor.deadline_at, params["run_deadline"]) if d is not None)
    monitor.updated_at = now
    monitor.save(update_fields=["state", "state_changed_at", "last_ping_at", "last_ping_kind", "last_start_at",
                                "last_duration_ms", "next_expected_at", "deadline_at", "updated_at"])
