"""Roles per action.

owner: everything; admin: everything but ownership (and billing); developer: the jobs of
the projects they reach (create, edit, delete, pause/resume, trigger, replay); viewer:
read only. A view names the least role each action needs in ``required_roles``; unnamed
safe actions need viewer, unnamed unsafe ones developer.

Detail routes check the role only after the object was found, so an id of another
organization answers 404 whatever the caller's role: ids leak nothing.
"""

import uuid

from rest_framework import exceptions, permissions

from apps.accounts.signin_scope import scope_of

from .actor import Role, actor_for_membership, session_membership


class OrganizationSuspended(exceptions.PermissionDenied):
    default_detail = "Your organization is suspended; contact the operators."
    default_code = "organization_suspended"


class NoOrganization(exceptions.PermissionDenied):
    default_detail = "You are not a member of this organization."
    default_code = "permission_denied"


def resolve_actor(request):
    """The Actor of this request (set by the API key authentication, or from the
    session user's membership). Raises NotAuthenticated / PermissionDenied."""
    actor = getattr(request, "actor", None)
    if actor is not None:
        return actor
    if request.auth is not None and hasattr(request.auth, "organization"):
        actor = request.auth
    elif request.user and request.user.is_authenticated:
        actor = _session_actor(request)
    else:
        raise exceptions.NotAuthenticated()
    request.actor = actor
    return actor


class OutOfSignInScope(exceptions.PermissionDenied):
    """The session's log-in does not reach this organization (apps.accounts.signin_scope)."""


def _session_actor(request):
    header = request.headers.get("X-Organization")
    chosen = header or request.session.get("organization_id")
    try:
        chosen = uuid.UUID(str(chosen)) if chosen else None
    except ValueError:
        raise NoOrganization() from None
    membership, refusal = session_membership(request.user, scope_of(request), chosen, strict=bool(header))
    if refusal is not None:
        raise OutOfSignInScope(refusal.message, refusal.code)
    if membership is None:
        raise NoOrganization()
    if membership.organization.suspended:
        raise OrganizationSuspended()
    return actor_for_membership(membership)


def required_role(view, request):
    roles = getattr(view, "required_roles", {})
    action = getattr(view, "action", None)
    if action in roles:
        return roles[action]
    return Role.VIEWER if request.method in permissions.SAFE_METHODS else Role.DEVELOPER


class RolePermission(permissions.BasePermission):
    message = "Your role does not allow this action."

    def has_permission(self, request, view):
        actor = resolve_actor(request)
        if _is_detail(view):
            return True  # decided in has_object_permission, once the object is found
        return actor.has_role(required_role(view, request))

    def has_object_permission(self, request, view, obj):
        return resolve_actor(request).has_role(required_role(view, request))


def _is_detail(view):
    kwarg = getattr(view, "lookup_url_kwarg", None) or getattr(view, "lookup_field", None)
    return bool(kwarg) and kwarg in getattr(view, "kwargs", {})
