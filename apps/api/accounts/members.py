"""Membership changes: roles, per-project grants (django-guardian), removal. Memberships are
made only by accepting an invitation (apps.api.accounts.invitations)."""

from guardian.shortcuts import assign_perm, remove_perm

from apps.accounts.audit import audited
from apps.accounts.models import Membership, project_model
from apps.api.actor import ACCESS_PROJECT, RANK, Role, actor_for_membership
from apps.api.errors import Conflict


class AlreadyMember(Conflict):
    default_detail = "This person is already a member of the organization."
    default_code = "already_member"


class LastOwner(Conflict):
    default_detail = "An organization keeps at least one owner; make someone else owner first."
    default_code = "last_owner"


def member_project_ids(membership):
    """None (every project) or the sorted ids of the projects granted to the member."""
    if not membership.limited_to_projects or RANK[membership.role] >= RANK[Role.ADMIN]:
        return None
    return sorted(str(pk) for pk in actor_for_membership(membership).project_ids)


def set_member_projects(membership, project_ids):
    """Replace the member's grants; None lifts the limit."""
    org_projects = project_model().objects.for_organization(membership.organization)
    remove_perm(ACCESS_PROJECT, membership.user, org_projects)
    membership.limited_to_projects = project_ids is not None
    membership.save(update_fields=["limited_to_projects"])
    if project_ids:
        assign_perm(ACCESS_PROJECT, membership.user, org_projects.filter(pk__in=project_ids))


@audited
def change(membership, *, role=None, project_ids=..., audit):
    if role is not None and membership.role == Role.OWNER and role != Role.OWNER:
        _keep_an_owner(membership)
    if role is not None:
        membership.role = role
        membership.save(update_fields=["role"])
    if project_ids is not ...:
        set_member_projects(membership, project_ids)
    audit("member.update", membership.user, {"role": membership.role, "projects": project_ids
                                              if project_ids is not ... else "unchanged"})
    return membership


@audited
def remove(membership, *, audit):
    if membership.role == Role.OWNER:
        _keep_an_owner(membership)
    remove_perm(ACCESS_PROJECT, membership.user, project_model().objects.for_organization(membership.organization))
    membership.delete()
    audit("member.remove", membership.user, {"email": membership.user.email})


def _keep_an_owner(membership):
    # Lock every owner row: two owners demoting each other at once cannot both succeed.
    owners = Membership.objects.for_organization(membership.organization).filter(role=Role.OWNER)
    if not [m for m in owners.select_for_update() if m.pk != membership.pk]:
        raise LastOwner()
