"""Who is calling: an organization, a role in it, and the projects they may reach.

Built once per request from either an API key or a logged-in user's membership, so
views and permissions ask one object instead of re-deriving roles and grants.
"""

from dataclasses import dataclass

from guardian.shortcuts import get_objects_for_user

from apps.accounts.models import ApiKey, Membership, Organization, User, project_model

Role = Membership.Role
RANK = {Role.VIEWER: 0, Role.DEVELOPER: 1, Role.ADMIN: 2, Role.OWNER: 3}
ACCESS_PROJECT = "projects.access_project"


@dataclass(frozen=True)
class Actor:
    organization: Organization
    role: str
    user: User | None = None
    api_key: ApiKey | None = None
    project_ids: frozenset | None = None  # None: every project of the organization

    def has_role(self, role):
        return RANK[self.role] >= RANK[role]

    @property
    def principal(self):
        """A stable name for the caller (throttling and idempotency keys)."""
        return key_principal(self.api_key) if self.api_key else f"user:{self.user.pk}"

    def projects(self):
        projects = project_model().objects.for_organization(self.organization)
        if self.project_ids is not None:
            projects = projects.filter(pk__in=self.project_ids)
        return projects

    def scope_to_projects(self, queryset, path="project"):
        """Keep the rows of ``queryset`` in projects this actor may reach."""
        if self.project_ids is None:
            return queryset
        return queryset.filter(**{f"{path}__in": self.project_ids})


def key_principal(api_key):
    return f"key:{api_key.pk}"


def actor_for_api_key(api_key):
    """A write key acts as an admin, a read key as a viewer. A key limited to projects
    acts at most as a developer: it manages jobs, never the organization."""
    role = Role.ADMIN if ApiKey.Scope.WRITE in api_key.scopes else Role.VIEWER
    project_ids = None
    if api_key.limited_to_projects:
        project_ids = frozenset(api_key.projects.values_list("pk", flat=True))
        role = Role.DEVELOPER if role == Role.ADMIN else role
    return Actor(api_key.organization, role, api_key=api_key, project_ids=project_ids)


def membership_for(user, organization_id=None, scope=None):
    """The user's membership in the organization they chose (X-Organization header), or
    their oldest one. None when they belong to no (such) organization. With ``scope`` (a
    session's sign-in scope, apps.accounts.signin_scope) only a membership that session may
    act in counts."""
    memberships = Membership.objects.filter(user=user).select_related("organization__plan", "organization__sso")
    if organization_id:
        memberships = memberships.filter(organization_id=organization_id)
    memberships = memberships.order_by("created_at", "pk")
    if scope is None:
        return memberships.first()
    return next((m for m in memberships if scope.refusal(m) is None), None)


def session_membership(user, scope, chosen=None, *, strict=False):
    """(membership, refusal) of a browser session: the chosen organization's membership when
    the session's sign-in ``scope`` reaches it. Otherwise, with ``strict`` (a choice made in
    this very request), None and the reason; without it, the oldest membership the session
    reaches (None and the reason when there is none)."""
    membership = membership_for(user, chosen) if chosen else None
    refusal = scope.refusal(membership) if membership is not None else None
    if membership is not None and refusal is None:
        return membership, None
    if strict and chosen:
        return None, refusal
    fallback = membership_for(user, None, scope)
    if fallback is None and refusal is None:
        first = membership_for(user)
        refusal = scope.refusal(first) if first is not None else None
    return fallback, (refusal if fallback is None else None)


def actor_for_membership(membership):
    project_ids = None
    if membership.limited_to_projects and not RANK[membership.role] >= RANK[Role.ADMIN]:
        granted = get_objects_for_user(
            membership.user, ACCESS_PROJECT,
            klass=project_model().objects.for_organization(membership.organization),
            with_superuser=False, accept_global_perms=False,
        )
        project_ids = frozenset(granted.values_list("pk", flat=True))
    return Actor(membership.organization, membership.role, user=membership.user, project_ids=project_ids)
