"""Every mutation through the API leaves an AuditEvent: who (user or API key), what,
which object, when and from which address."""

import ipaddress

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
