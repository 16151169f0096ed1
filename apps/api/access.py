"""Who is looking at a page: the logged-in user's membership as the API's Actor.

The pages use the same Actor, roles and project scoping as the REST API
(apps.api.actor): a session user acts in one organization at a time, the one
chosen with the switcher (kept in the session under the key the API reads too).
"""

from functools import wraps

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import render

from apps.api.actor import RANK, Role, actor_for_membership, session_membership
from apps.accounts.models import Membership
from apps.accounts.signin_scope import scope_of

SESSION_KEY = "organization_id"  # also read by apps.api.permissions

__all__ = ["Role", "RANK", "member_view", "require_role", "current_membership", "memberships_of"]


def current_membership(request):
    """The membership chosen in this session, else the user's oldest, among those the
    session's log-in reaches (apps.accounts.signin_scope); None without one."""
    return session_membership_or_refusal(request)[0]


def session_membership_or_refusal(request):
    """(membership, None), or (None, why the session's log-in reaches none)."""
    chosen = request.session.get(SESSION_KEY)
    membership, refusal = session_membership(request.user, scope_of(request), chosen)
    if membership is not None and str(membership.organization_id) != str(chosen):
        request.session[SESSION_KEY] = str(membership.organization_id)
    return membership, refusal


def memberships_of(user, scope=None):
    """The user's memberships by organization name; with ``scope`` (a session's sign-in
    scope) only those that session may act in."""
    memberships = (Membership.objects.filter(user=user).select_related("organization__sso")
                   .order_by("organization__name"))
    return [m for m in memberships if scope is None or scope.refusal(m) is None]


def member_view(view=None, *, role=Role.VIEWER):
    """Log-in required; sets ``request.actor`` (the API's Actor) and checks ``role``.

    A user without an organization, or whose organization is suspended, gets a 403 page
    that says so. Views of one object find it first (404 for another tenant's id) and
    check a higher role with require_role afterwards, as the API does."""

    def decorate(func):
        @login_required
        @wraps(func)
        def wrapper(request, *args, **kwargs):
            membership, refusal = session_membership_or_refusal(request)
            if refusal is not None:
                return render(request, "web/sign_in_scope.html", {"refusal": refusal}, status=403)
            if membership is None:
                return render(request, "web/no_organization.html", status=403)
            if membership.organization.suspended:
                return render(request, "web/suspended.html", {"organization": membership.organization}, status=403)
            request.actor = actor_for_membership(membership)
            request.membership = membership
            require_role(request, role)
            return func(request, *args, **kwargs)

        return wrapper

    return decorate(view) if view is not None else decorate


def require_role(request, role):
    if not request.actor.has_role(role):
        raise PermissionDenied(f"This needs the {Role(role).label.lower()} role or higher.")
