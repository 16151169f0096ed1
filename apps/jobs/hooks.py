"""The plan's limits a job is checked against, which billing registers.

A job's validation asks whether the organization's plan allows it (max_jobs, the minimum
interval, max_timeout_seconds, max_attempts), and every limit is enforced in one place,
apps.billing.limits. Billing sits above jobs, so it registers those checks from its
``AppConfig.ready()`` with ``on_plan_limits`` and the jobs app imports no higher app
(docs/architecture.md, "Layers").

``PlanLimit`` is the refusal the checks raise (HTTP 402 ``plan_limit``). It is defined
here, below billing, so that jobs, its API and its pages catch it without importing billing;
apps.billing.limits raises this very class.
"""

from __future__ import annotations

from cronsvc.slot import Slot


class PlanLimit(Exception):
    def __init__(self, *, limit, field, message, plan=None, reason=None):
        super().__init__(message)
        self.limit, self.field, self.message, self.plan, self.reason = limit, field, message, plan, reason


_limits = Slot("plan limits", "apps.billing")


def on_plan_limits(limits):
    """Register ``limits``, which has the checks of apps.billing.limits:
    ``check_job_count(plan, count, adding)``, ``check_frequency(plan, too_frequent)``,
    ``check_timeout(plan, timeout_seconds)``, ``check_attempts(plan, max_attempts)`` (each
    raising PlanLimit) and ``job_violations(plan, *, timeout_seconds, max_attempts,
    too_frequent)`` (the PlanLimits a job's values break). One registration: another
    replaces it."""
    return _limits.fill(limits)


def plan_limits():
    return _limits.get()
