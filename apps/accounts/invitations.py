"""Invitation links: the token, its stored hash, and why a link no longer works.

A token is 32 random bytes (URL-safe base64); only its SHA-256 is stored, so a copy of the
database cannot accept anyone's invitation. A link is found by that hash (a unique index),
never by comparing tokens one by one. Who may invite, resend and revoke, the quotas and
accepting live in apps.api.accounts.invitations; the admin's actions use this module.
"""

import hashlib
import secrets
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from .audit import audited, no_audit
from .models import Invitation

VALIDITY = timedelta(days=7)

# Why a link does not work: the code shown on the page (and in its status).
REFUSALS = {
    None: ("invitation_invalid", 404, "This invitation link does not work: it is incomplete, or a newer "
                                      "invitation replaced it."),
    Invitation.Status.EXPIRED: ("invitation_expired", 410, "This invitation has expired."),
    Invitation.Status.REVOKED: ("invitation_revoked", 410, "This invitation was withdrawn."),
    Invitation.Status.ACCEPTED: ("invitation_used", 410, "This invitation was accepted already; it works once."),
}


def hash_token(token):
    return hashlib.sha256(token.encode()).hexdigest()


def new_token():
    """(token for the link, its hash to store)."""
    token = secrets.token_urlsafe(32)
    return token, hash_token(token)


def expiry(now=None):
    return (now or timezone.now()) + VALIDITY


def find(token):
    """The invitation of a link's token, or None."""
    if not token or len(token) > 100:
        return None
    return (Invitation.objects.select_related("organization", "invited_by")
            .filter(token_hash=hash_token(token)).first())


def refusal(invitation, now=None):
    """None when the link may be used, else (code, HTTP status, message)."""
    if invitation is None:
        return REFUSALS[None]
    return REFUSALS.get(invitation.status(now))


def new_link(invitation, *, audit=no_audit, now=None):
    """Give the invitation a new token valid VALIDITY from now and e-mail it: the previous
    link stops working (only a hash is kept, so an old token can never be sent again).
    ``audit(action, target, data)`` is written in the same transaction; the e-mail leaves
    after it."""
    token = _renew(invitation, audit=audit, now=now or timezone.now())
    send(invitation, token)
    return invitation


@audited
def _renew(invitation, *, audit, now):
    token, invitation.token_hash = new_token()
    invitation.expires_at = expiry(now)
    invitation.last_sent_at = now
    invitation.send_count += 1
    invitation.save(update_fields=["token_hash", "expires_at", "last_sent_at", "send_count"])
    audit("invitation.resend", invitation, {"email": invitation.email, "send_count": invitation.send_count})
    return token


@audited
def revoke(invitation, *, audit, now=None):
    """Close an open invitation (its link then answers invitation_revoked), with its audit
    event; False when it was closed already."""
    if invitation.accepted_at is not None or invitation.revoked_at is not None:
        return False
    invitation.revoked_at = now or timezone.now()
    invitation.save(update_fields=["revoked_at"])
    audit("invitation.revoke", invitation, {"email": invitation.email})
    return True


def link(token):
    """SITE_URL's, never the request's Host (a forged Host header must not choose the link)."""
    return settings.SITE_URL + reverse("web:invitation", args=[token])


def send(invitation, token):
    """The same e-mail whether or not the address has an account (the page it links to
    offers to sign in, or to choose a password)."""
    context = {"invitation": invitation, "organization": invitation.organization,
               "role": invitation.get_role_display(), "invited_by": invitation.invited_by, "link": link(token)}
    send_mail(
        subject=f"You are invited to {invitation.organization.name} on cronsvc",
        message=render_to_string("web/email/invitation.txt", context),
        from_email=settings.DEFAULT_FROM_EMAIL, recipient_list=[invitation.email], fail_silently=True,
    )
