"""Memberships by consent: invite, resend, revoke, accept (the API and the pages call these;
the admin's actions use apps.accounts.invitations directly).

Inviting never looks the address up among the accounts: the answer, its time and the
e-mail sent are the same whether or not the address has an account. A membership is made
only by ``accept``, for the person signed in as the invited address.
"""

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone
from rest_framework import exceptions

from apps.accounts import invitations as links
from apps.accounts.models import Invitation, Membership, project_model
from apps.api import ratelimit
from apps.accounts.audit import audited, no_audit
from apps.api.errors import Conflict

from .members import AlreadyMember, set_member_projects

WINDOW = 3600  # the invitation quotas are per hour


class AlreadyInvited(Conflict):
    default_detail = "This address has a pending invitation already: resend it, or revoke it first."
    default_code = "already_invited"


class InvitationClosed(Conflict):
    default_detail = "This invitation was accepted or revoked; invite the address again instead."
    default_code = "invitation_closed"


class TooManyInvitations(exceptions.Throttled):
    default_code = "too_many_invitations"

    def __init__(self, wait, scope):
        super().__init__(wait, f"Too many invitations sent {scope} in the last hour; try again later.")


def normalize(email):
    return email.strip().lower()


def spend_quota(organization, email):
    """Count one invitation e-mail; raise TooManyInvitations (429, Retry-After) past
    INVITATIONS_PER_ORGANIZATION_PER_HOUR or INVITATIONS_PER_ADDRESS_PER_HOUR. The address
    is counted within the organization: another organization's invitations to it are
    never visible through this limit."""
    for name, ident, limit, scope in (
        ("invite-org", str(organization.pk), settings.INVITATIONS_PER_ORGANIZATION_PER_HOUR, "by this organization"),
        ("invite-address", f"{organization.pk}:{email}", settings.INVITATIONS_PER_ADDRESS_PER_HOUR,
         "to this address"),
    ):
        if ratelimit.hit(name, ident, window=WINDOW) > limit:
            raise TooManyInvitations(ratelimit.count(name, ident, window=WINDOW)[1], scope)


def invite(organization, *, email, role, project_ids, invited_by=None, audit=no_audit, now=None):
    """A pending invitation, e-mailed. Raises AlreadyMember (409: the address is a member of
    this organization, which its managers see anyway), AlreadyInvited (409) or
    TooManyInvitations (429). ``audit(action, target, data)`` writes the audit event in the
    invitation's transaction (both commit, or neither); the e-mail leaves after it."""
    now = now or timezone.now()
    email = normalize(email)
    if Membership.objects.for_organization(organization).filter(user__email__iexact=email).exists():
        raise AlreadyMember()
    token, token_hash = links.new_token()
    try:
        with transaction.atomic():
            # An expired invitation of the address is closed: the new one replaces it.
            open_ = Invitation.objects.for_organization(organization).select_for_update().filter(
                email=email, accepted_at__isnull=True, revoked_at__isnull=True).first()
            if open_ is not None:
                if open_.status(now) != Invitation.Status.EXPIRED:
                    raise AlreadyInvited()
                open_.revoked_at = now
                open_.save(update_fields=["revoked_at"])
            spend_quota(organization, email)
            invitation = Invitation.objects.create(
                organization=organization, email=email, role=role, invited_by=invited_by, token_hash=token_hash,
                created_at=now, expires_at=links.expiry(now), last_sent_at=now,
                limited_to_projects=project_ids is not None)
            if project_ids:
                invitation.projects.set(project_ids)
            audit("invitation.create", invitation, {"email": email, "role": role, "projects": project_ids})
    except IntegrityError:  # the same address invited twice at once
        raise AlreadyInvited() from None
    links.send(invitation, token)
    return invitation


def resend(invitation, *, audit=no_audit, now=None):
    """A new link valid for another 7 days (the old one stops working). Pending or expired
    invitations only."""
    if invitation.accepted_at is not None or invitation.revoked_at is not None:
        raise InvitationClosed()
    spend_quota(invitation.organization, invitation.email)
    return links.new_link(invitation, audit=audit, now=now)


def revoke(invitation, *, audit=no_audit, now=None):
    """Withdraw a pending (or expired) invitation. False when it was revoked already."""
    if invitation.accepted_at is not None:
        raise InvitationClosed("This invitation was accepted already: remove the member instead.")
    return links.revoke(invitation, audit=audit, now=now)


def project_ids(invitation):
    """None (every project) or the sorted ids of the projects the invitation grants."""
    if not invitation.limited_to_projects:
        return None
    return sorted(str(pk) for pk in invitation.projects.values_list("pk", flat=True))


@audited
def accept(invitation, user, *, audit, now=None):
    """Make ``user`` (signed in as the invited address: the caller checked) a member.
    Returns (membership, created); raises ValueError with the refusal code when the link
    is no longer usable (checked again under the row's lock: a link works once)."""
    now = now or timezone.now()
    invitation = Invitation.objects.select_for_update().select_related("organization").get(pk=invitation.pk)
    refused = links.refusal(invitation, now)
    if refused is not None:
        raise ValueError(refused[0])
    if normalize(user.email) != invitation.email:
        raise ValueError("invitation_wrong_account")
    invitation.accepted_at, invitation.accepted_by = now, user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    membership = Membership.objects.filter(user=user, organization=invitation.organization).first()
    if membership is not None:  # joined meanwhile (single sign-on): the invitation changes nothing
        return membership, False
    membership = Membership.objects.create(user=user, organization=invitation.organization, role=invitation.role,
                                           created_at=now)
    granted = project_ids(invitation)
    if granted is not None:  # projects deleted since the invitation are left out
        granted = list(project_model().objects.for_organization(invitation.organization)
                       .filter(pk__in=granted).values_list("pk", flat=True))
    set_member_projects(membership, granted)
    audit("invitation.accept", invitation, {"email": invitation.email, "role": membership.role})
    return membership, True
