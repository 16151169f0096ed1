"""Operator actions on tenants, each written to the audit log."""

from django.db import transaction
from django.utils import timezone

from apps.sql import rows
from cronsvc import secrets

from .hooks import run_plan_change
from .models import AuditEvent


def record_audit(organization, action, *, target=None, actor_user=None, actor_api_key=None, data=None, ip=None):
    """One AuditEvent; ``data`` is kept with the secrets the registry (cronsvc.secrets) declares masked."""
    return rows.insert(AuditEvent(  # every API mutation writes one: no ORM insert compiler
        organization=organization,
        actor_user=actor_user,
        actor_api_key=actor_api_key,
        action=action,
        target_type=target._meta.label_lower if target is not None else "",
        target_id=str(target.pk) if target is not None else "",
        data=secrets.masked_payload(target._meta.label if target is not None else "", data or {}),
        ip=ip,
    ))


@transaction.atomic
def suspend_organization(organization, *, reason="", actor_user=None, now=None):
    """Stop the tenant's jobs from firing and its API keys from working."""
    organization.suspended = True
    organization.suspended_reason = reason
    organization.suspended_at = now or timezone.now()
    organization.save(update_fields=["suspended", "suspended_reason", "suspended_at"])
    record_audit(organization, "organization.suspend", target=organization, actor_user=actor_user,
                 data={"reason": reason})


@transaction.atomic
def unsuspend_organization(organization, *, actor_user=None):
    organization.suspended = False
    organization.suspended_reason = ""
    organization.suspended_at = None
    organization.save(update_fields=["suspended", "suspended_reason", "suspended_at"])
    record_audit(organization, "organization.unsuspend", target=organization, actor_user=actor_user)


@transaction.atomic
def change_plan(organization, plan, *, actor_user=None, now=None):
    """Move the organization to ``plan``: jobs the plan does not allow are paused (never
    deleted) and its waiting runs move to the plan's queue. Returns billing's PlanChange
    (``paused``: the jobs paused, with the limits each breaks)."""
    previous = organization.plan.code
    organization.plan = plan
    organization.save(update_fields=["plan"])
    change = run_plan_change(organization, plan, now=now)
    record_audit(organization, "organization.change_plan", target=organization, actor_user=actor_user,
                 data={"from": previous, "to": plan.code,
                       "paused_jobs": [str(job.pk) for job, _ in change.paused],
                       "resumed_jobs": [str(job.pk) for job in change.resumed]})
    return change


@transaction.atomic
def revoke_api_key(api_key, *, actor_user=None, actor_api_key=None, now=None):
    if api_key.revoked_at is None:
        api_key.revoked_at = now or timezone.now()
        api_key.save(update_fields=["revoked_at"])
        record_audit(api_key.organization, "api_key.revoke", target=api_key, actor_user=actor_user,
                     actor_api_key=actor_api_key)
