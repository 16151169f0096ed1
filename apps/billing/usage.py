"""This month's usage of an organization, as the API and the settings page show it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone

from apps.executions.models import UsageDay, UsageMonth
from apps.executions.usage.metering import month_start, utc_day

from .pricing import month_cost

HISTORY_DAYS = 90


@dataclass
class Usage:
    month: date
    plan: object
    runs: int
    quota: int
    projected_runs: int
    base_cents: int
    overage_runs: int
    overage_cents: int
    cost_cents: int
    days: list = field(default_factory=list)  # [{"day", "runs", "succeeded", "failed"}], oldest first

    @property
    def percent(self):
        return round(100 * self.runs / self.quota, 1) if self.quota else 0.0

    @property
    def projected_cost_cents(self):
        return month_cost(self.plan, self.projected_runs).total_cents


def next_month(month):
    return (month + timedelta(days=32)).replace(day=1)


def usage_for(organization, *, now):
    plan = organization.plan
    today = utc_day(now)
    month = month_start(today)
    runs = (UsageMonth.objects.filter(organization=organization, month=month)
            .values_list("runs", flat=True).first()) or 0
    cost = month_cost(plan, runs)
    return Usage(month=month, plan=plan, runs=runs, quota=plan.monthly_executions,
                 projected_runs=project(runs, month, now), base_cents=cost.base_cents,
                 overage_runs=cost.overage_runs, overage_cents=cost.overage_cents, cost_cents=cost.total_cents,
                 days=daily_history(organization, today))


def project(runs, month, now):
    """Month-end runs at this month's rate so far (the elapsed part of the month)."""
    start = datetime.combine(month, datetime.min.time(), tzinfo=timezone.utc)
    end = datetime.combine(next_month(month), datetime.min.time(), tzinfo=timezone.utc)
    elapsed = max((now - start).total_seconds(), 3600.0)  # the first hour is too noisy to scale
    return runs if elapsed >= (end - start).total_seconds() else round(runs * (end - start).total_seconds() / elapsed)


def daily_history(organization, today, days=HISTORY_DAYS):
    """Every day of the last ``days`` (today included), zeros where nothing ran."""
    first = today - timedelta(days=days - 1)
    rows = {row.day: row for row in UsageDay.objects.filter(organization=organization, day__gte=first, day__lte=today)}
    history = []
    for offset in range(days):
        day = first + timedelta(days=offset)
        row = rows.get(day)
        history.append({"day": day, "runs": row.runs if row else 0, "succeeded": row.succeeded if row else 0,
                        "failed": row.failed if row else 0})
    return history
