"""Monthly statements: one per organization and month, made once the month is over.

Idempotent (unique organization + period): the housekeeping task runs daily and makes only
the statements still missing, so a missed run catches up. The statement bills the plan the
organization is on when it is made, and the runs metered for the month (UsageMonth).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import IntegrityError, transaction

from apps.accounts.models import Organization
from apps.executions.models import UsageMonth
from apps.executions.usage.metering import month_start, utc_day

from .models import Statement
from .payments import payment_provider
from .pricing import format_cents, month_cost
from .usage import next_month

log = logging.getLogger(__name__)


def previous_month(now):
    return month_start(month_start(utc_day(now)) - timedelta(days=1))


def generate_statements(period, *, now):
    """Make the missing statements for ``period`` (a month's first day) of every
    organization that existed before the month ended. Returns the new statements."""
    end = next_month(period)
    if month_start(utc_day(now)) < end:
        raise ValueError(f"{period:%Y-%m} is not over yet")
    done = Statement.objects.filter(period=period).values_list("organization_id", flat=True)
    organizations = (Organization.objects.exclude(id__in=done).filter(created_at__date__lt=end)
                     .select_related("plan").order_by("id"))
    usage = {org: (runs, pings) for org, runs, pings in
             UsageMonth.objects.filter(month=period).values_list("organization_id", "runs", "pings")}
    made = []
    for organization in organizations.iterator(chunk_size=500):
        runs, pings = usage.get(organization.id, (0, 0))
        statement = make_statement(organization, period, runs, pings=pings)
        if statement is not None:
            made.append(statement)
    return made


def make_statement(organization, period, runs, *, pings=0):
    plan = organization.plan
    cost = month_cost(plan, runs)
    try:
        with transaction.atomic():
            statement = Statement.objects.create(
                organization=organization, period=period, plan=plan, plan_code=plan.code, plan_name=plan.name,
                runs=runs, quota=plan.monthly_executions, overage_runs=cost.overage_runs,
                base_cents=cost.base_cents, overage_cents=cost.overage_cents, total_cents=cost.total_cents,
                lines=statement_lines(plan, period, runs, cost, pings=pings),
            )
            transaction.on_commit(lambda: _hand_to_provider(statement))
    except IntegrityError:  # another run of the task made it first
        return None
    return statement


def statement_lines(plan, period, runs, cost, *, pings=0):
    lines = [{"description": f"{plan.name} plan, {period:%B %Y}", "quantity": 1, "amount_cents": cost.base_cents}]
    if pings:  # included in the plan (monitor_pings_per_month caps them): shown, not charged
        lines.append({"description": f"Heartbeat monitor pings ({plan.monitor_pings_per_month:,} included)",
                      "quantity": pings, "amount_cents": 0})
    if cost.overage_runs:
        thousands = -(-cost.overage_runs // 1000)
        lines.append({"description": f"Overage: {cost.overage_runs:,} runs past {plan.monthly_executions:,} "
                                     f"({thousands:,} x 1,000 at {format_cents(plan.overage_cents_per_1000)})",
                      "quantity": thousands, "amount_cents": cost.overage_cents})
    return lines


def _hand_to_provider(statement):
    try:
        reference = payment_provider().statement_created(statement)
    except Exception:  # the statement stands; the integration can pick it up again
        log.exception("payment provider failed for statement %s", statement.pk)
        return
    if reference:
        Statement.objects.filter(pk=statement.pk).update(provider_reference=reference)
