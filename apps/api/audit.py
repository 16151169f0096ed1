"""Who acts, as a request tells it: its audit events (apps.accounts.audit) name the user or
API key and the client's address."""

import ipaddress

from rest_framework.throttling import BaseThrottle

from apps.accounts.audit import audit_by


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
    return audit_by(actor.organization, user=actor.user, api_key=actor.api_key, ip=client_ip(request))(
        action, target, data)
