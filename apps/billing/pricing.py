"""Money: what a month of runs costs on a plan. Integer cents throughout."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Cost:
    base_cents: int
    overage_runs: int
    overage_cents: int

    @property
    def total_cents(self):
        return self.base_cents + self.overage_cents


def month_cost(plan, runs):
    """The plan's price plus, on an ``overage`` plan, every started 1,000 runs past the quota
    at ``overage_cents_per_1000``. A ``block`` plan never runs past its quota (its runs are
    skipped), so it owes no overage even if a few slipped through."""
    over = max(0, runs - plan.monthly_executions)
    if plan.over_quota != "overage" or not over:
        return Cost(plan.monthly_price_cents, 0, 0)
    return Cost(plan.monthly_price_cents, over, math.ceil(over / 1000) * plan.overage_cents_per_1000)


def format_cents(cents, currency="USD"):
    return f"{currency} {cents / 100:,.2f}"
