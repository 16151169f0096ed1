"""Every plan limit, checked in one place.

A limit check takes the plan and the facts (counts, seconds) and raises PlanLimit, which
the API answers with 402 ``plan_limit`` naming the limit and the cheapest plan that allows
the request. Checks that need a job's schedule take a function ``too_frequent(min_interval)``
returning the schedule error (or None), so this app needs no schedule math of its own.

``job_violations`` applies the same checks to an existing job (a plan downgrade pauses the
jobs it finds). The maximum concurrency is enforced by the workers' semaphore, and the
monthly quota by the workers' admission (apps.executions.usage.quota).
"""

from __future__ import annotations

from .models import Plan


class PlanLimit(Exception):
    """The refusal every check raises (HTTP 402 ``plan_limit``); jobs, monitors, the API
    and the pages catch it."""

    def __init__(self, *, limit, field, message, plan=None, reason=None):
        super().__init__(message)
        self.limit, self.field, self.message, self.plan, self.reason = limit, field, message, plan, reason


def cheapest_plan(allows):
    """Code of the cheapest plan for which ``allows(plan)`` holds, or None."""
    for candidate in Plan.objects.order_by("monthly_price_cents", "code"):
        if allows(candidate):
            return candidate.code
    return None


def check_job_count(plan, count, adding=1):
    """``count`` jobs exist; may ``adding`` more be made?"""
    _check_count(plan, "max_jobs", "jobs", count, adding)


def check_monitor_count(plan, count, adding=1):
    """``count`` heartbeat monitors exist; may ``adding`` more be made?"""
    _check_count(plan, "max_monitors", "monitors", count, adding)


def _check_count(plan, limit, things, count, adding):
    allowed = getattr(plan, limit)
    if count + adding > allowed:
        raise PlanLimit(
            limit=limit, field=None, plan=cheapest_plan(lambda p: getattr(p, limit) >= count + adding),
            message=f"Your plan ({plan.name}) allows {allowed} {things} and you have {count}; "
                    "delete some or upgrade the plan.",
        )


def check_timeout(plan, timeout_seconds):
    if timeout_seconds > plan.max_timeout_seconds:
        raise PlanLimit(
            limit="max_timeout_seconds", field="request.timeout_seconds",
            plan=cheapest_plan(lambda p: p.max_timeout_seconds >= timeout_seconds),
            message=f"request.timeout_seconds: your plan ({plan.name}) allows at most "
                    f"{plan.max_timeout_seconds} seconds.",
        )


def check_attempts(plan, max_attempts):
    if max_attempts > plan.max_attempts:
        raise PlanLimit(
            limit="max_attempts", field="retry.max_attempts",
            plan=cheapest_plan(lambda p: p.max_attempts >= max_attempts),
            message=f"retry.max_attempts: your plan ({plan.name}) allows at most {plan.max_attempts} attempts.",
        )


def check_frequency(plan, too_frequent):
    """``too_frequent(min_interval_seconds)`` -> the schedule error (field, message) or None."""
    error = too_frequent(plan.min_interval_seconds)
    if error is None:
        return
    raise PlanLimit(
        limit="min_interval_seconds", field=error.field, reason="interval_too_short", message=error.message,
        plan=cheapest_plan(lambda p: too_frequent(p.min_interval_seconds) is None),
    )


def job_violations(plan, *, timeout_seconds, max_attempts, too_frequent):
    """Every limit an existing job breaks on ``plan`` (empty when it fits)."""
    found = []
    for check, arg in ((check_frequency, too_frequent), (check_timeout, timeout_seconds),
                       (check_attempts, max_attempts)):
        try:
            check(plan, arg)
        except PlanLimit as exc:
            found.append(exc)
    return found
