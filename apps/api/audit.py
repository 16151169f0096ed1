"""Every mutation through the API leaves an AuditEvent: who (user or API key), what,
which object, when and from which address.

A change and its audit event commit together or not at all, and that is done one way: the
change is a service function decorated with ``audited``, which the API's views and the pages
call with their ``audit`` (``audit`` below bound to the request); the function writes the
event by calling ``audit(action, target, data)`` when it knows what it changed."""

import functools
import ipaddress

from django.db import transaction
from rest_framework.throttling import BaseThrottle

from apps.accounts.services import record_audit


def client_ip(request):
    """The client's address as DRF sees it: X-Forwarded-For only through the trusted
    proxies (API_TRUSTED_PROXIES), else REMOTE_ADDR. None when it is not an IP."""
    ident = BaseThrottle().get_ident(request)
    try:
        return str(ipaddress.ip_address(ident))
    except ValueError:
        return None


def audit(request, action, target=None, data=None):
    actor = request.actor
    return record_audit(
        actor.organization, action, target=target, actor_user=actor.user,
        actor_api_key=actor.api_key, data=data, ip=client_ip(request),
    )


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
