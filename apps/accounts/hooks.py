"""What a higher app does when accounts changes an organization's plan.

An organization's plan is a ``Plan`` (apps.plans, below accounts): accounts records the
change and its audit event, billing brings the organization's jobs and waiting runs in line
with the new plan (pausing, resuming, requeueing: jobs and runs live above accounts).
Billing registers that from its ``AppConfig.ready()`` with ``on_plan_change``, so accounts
imports no higher app (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from cronsvc.slot import Slot

_plan_change = Slot("plan-change hook", "apps.billing")


def on_plan_change(hook):
    """Register ``hook(organization, plan, *, now)``, called inside ``change_plan``'s
    transaction after the new plan is saved; it returns what the change did (billing's
    PlanChange). One hook: registering another replaces it. Usable as a decorator."""
    return _plan_change.fill(hook)


def run_plan_change(organization, plan, *, now=None):
    return _plan_change.get()(organization, plan, now=now)


# --- telling an organization something (billing's quota warnings, ...)

_notice = Slot("organization notice hook", "apps.notifications")


def on_organization_notice(hook):
    """Register ``hook(organization_id, kind, subject, text, data)``, which tells an
    organization something inside the caller's transaction (notifications registers its
    e-mails and channels). One hook: registering another replaces it."""
    return _notice.fill(hook)


def notify_organization(organization_id, kind, subject, text, data=None):
    """Tell the organization through the registered hook; False when none is registered
    (the caller then chooses its own way)."""
    if not _notice.filled:
        return False
    _notice.get()(organization_id, kind, subject, text, data)
    return True


# --- what an organization's cancelled deletion gives back (jobs: resumed)

_deletion_cancelled = Slot("deletion-cancel hook", "apps.jobs")


def on_deletion_cancelled(hook):
    """Register ``hook(organization, reason, *, now)``, called inside ``cancel_deletion``'s
    transaction: it resumes what the deletion paused with ``reason`` (the jobs app's jobs),
    and nothing a person paused before. One hook: registering another replaces it."""
    return _deletion_cancelled.fill(hook)


def resume_after_cancelled_deletion(organization, reason, *, now):
    return _deletion_cancelled.get()(organization, reason, now=now)
