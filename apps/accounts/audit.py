"""The audit log: every change a person or an API key makes leaves an AuditEvent (who, what,
which object, when and from which address).

A change and its audit event commit together or not at all, and that is done one way: the
change is a service function decorated with ``audited``; its caller passes ``audit``, bound to
who acts (the API's views and the pages: apps.api.audit.audit bound to the request; the
admin: ``audit_by`` bound to the operator), and the function writes the event by calling
``audit(action, target, data)`` when it knows what it changed.

What goes through ``audited``, and what does not: a change this code makes and audits goes
through it, so the event cannot outlive a change rolled back nor be lost from one committed.
An event that records something that is not a change made by the code writing it (a sign-in
let in or refused, an SSO refusal, a break-glass log-in) is one plain ``record_audit`` call:
there is no change to commit with it. One change cannot bind its ``audit`` in advance, the
sign-up (apps/web/views/auth.py): its actor and organization are what it creates, so it
writes ``organization.signup`` itself, inside the same ``transaction.atomic``."""

import functools

from django.db import transaction

from apps.sql import rows
from cronsvc import secrets

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


def audit_by(organization, *, user=None, api_key=None, ip=None, operator=False):
    """The ``audit`` of ``user`` (or ``api_key``) acting on ``organization``; an operator's
    (the admin's) events say so (``by_operator``)."""

    def audit(action, target=None, data=None):
        if operator:
            data = {**(data or {}), "by_operator": True}
        return record_audit(organization, action, target=target, actor_user=user, actor_api_key=api_key,
                            data=data, ip=ip)

    return audit


def no_audit(action, target=None, data=None):
    """The ``audit`` of a change the system makes on its own (a plan change, an auto-disable): no event."""
    return None


def audited(change):
    """``change(..., audit)`` runs in one transaction with the audit event it writes: both
    commit, or neither does. Called without ``audit``, it writes none (``no_audit``)."""

    @functools.wraps(change)
    def in_one_transaction(*args, audit=no_audit, **kwargs):
        with transaction.atomic():
            return change(*args, audit=audit, **kwargs)

    return in_one_transaction
