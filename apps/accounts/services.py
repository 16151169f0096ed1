"""Actions on tenants (an operator's, or its own admin's rename), each with its audit event
(apps.accounts.audit)."""

from django.utils import timezone

from .audit import audited
from .hooks import run_plan_change


@audited
def rename_organization(organization, name, *, audit):
    previous, organization.name = organization.name, name
    organization.save(update_fields=["name"])
    audit("organization.rename", organization, {"from": previous, "to": name})


@audited
def suspend_organization(organization, *, reason="", now=None, audit):
    """Stop the tenant's jobs from firing and its API keys from working."""
    organization.suspended = True
    organization.suspended_reason = reason
    organization.suspended_at = now or timezone.now()
    organization.save(update_fields=["suspended", "suspended_reason", "suspended_at"])
    audit("organization.suspend", organization, {"reason": reason})


@audited
def unsuspend_organization(organization, *, audit):
    organization.suspended = False
    organization.suspended_reason = ""
    organization.suspended_at = None
    organization.save(update_fields=["suspended", "suspended_reason", "suspended_at"])
    audit("organization.unsuspend", organization)


@audited
def change_plan(organization, plan, *, now=None, audit):
    """Move the organization to ``plan``: jobs the plan does not allow are paused (never
    deleted) and its waiting runs move to the plan's queue. Returns billing's PlanChange
    (``paused``: the jobs paused, with the limits each breaks)."""
    previous = organization.plan.code
    organization.plan = plan
    organization.save(update_fields=["plan"])
    change = run_plan_change(organization, plan, now=now)
    audit("organization.change_plan", organization, {
        "from": previous, "to": plan.code,
        "paused_jobs": [str(job.pk) for job, _ in change.paused],
        "resumed_jobs": [str(job.pk) for job in change.resumed]})
    return change


@audited
def revoke_api_key(api_key, *, now=None, audit):
    if api_key.revoked_at is None:
        api_key.revoked_at = now or timezone.now()
        api_key.save(update_fields=["revoked_at"])
        audit("api_key.revoke", api_key)
