"""The invitation link's page (accept only as the invited address; a new person chooses a
password), the members page's resend and revoke, and the admin's."""

import re
from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from apps.accounts.models import AuditEvent, Invitation, Membership, User
from apps.api.access import SESSION_KEY
from apps.api.accounts import invitations
from apps.projects.models import Project

PASSWORD = "a-long-enough-pass-42"


def invite(tenant, email, **kwargs):
    """(invitation, link path) as e-mailed."""
    kwargs.setdefault("role", "developer")
    kwargs.setdefault("project_ids", None)
    invitation = invitations.invite(tenant.organization, email=email, invited_by=tenant.owner, **kwargs)
    path = re.search(r"https?://[^/\s]+(/invitation/\S+/)", mail.outbox[-1].body).group(1)
    return invitation, path


def signed_in(email, password=PASSWORD):
    user = User.objects.filter(email=email).first() or User.objects.create_user(email=email, password=password)
    client = Client()
    client.force_login(user)
    client.user = user
    return client


def test_a_signed_in_person_accepts_with_a_button(tenant):
    other = Project.objects.create(organization=tenant.organization, name="Other", slug="other")
    invitation, link = invite(tenant, "pat@example.com", role="viewer", project_ids=[str(other.pk)])
    pat = signed_in("pat@example.com")
    page = pat.get(link)
    assert page.status_code == 200 and "Accept and join" in page.content.decode()
    assert not Membership.objects.filter(user=pat.user).exists()  # a GET changes nothing
    response = pat.post(link)
    assert response.status_code == 302 and response["Location"] == "/"
    membership = Membership.objects.get(user=pat.user, organization=tenant.organization)
    assert membership.role == "viewer" and membership.limited_to_projects
    assert pat.session[SESSION_KEY] == str(tenant.organization.pk)
    assert [p["id"] for p in pat.get("/api/v1/projects/").json()["results"]] == [str(other.pk)]
    invitation.refresh_from_db()
    assert invitation.accepted_by == pat.user and invitation.accepted_at is not None
    event = AuditEvent.objects.get(organization=tenant.organization, action="invitation.accept")
    assert event.actor_user == pat.user and event.target_id == str(invitation.pk)
    again = pat.post(link)
    assert again.status_code == 410 and "invitation_used" in again.content.decode()


def test_another_signed_in_user_is_refused(tenant):
    _, link = invite(tenant, "pat@example.com")
    mallory = signed_in("mallory@example.com")
    for response in (mallory.get(link), mallory.post(link)):
        assert response.status_code == 403 and "invitation_wrong_account" in response.content.decode()
    assert not Membership.objects.filter(organization=tenant.organization, user=mallory.user).exists()
    # The link still works for the invited person.
    assert signed_in("pat@example.com").post(link).status_code == 302


def test_a_person_with_an_account_logs_in_first_and_comes_back(tenant):
    User.objects.create_user(email="pat@example.com", password=PASSWORD)
    _, link = invite(tenant, "Pat@Example.com")
    client = Client()
    page = client.get(link)
    assert page.status_code == 200 and f"/login/?next={link}" in page.content.decode()
    assert "new_password1" not in page.content.decode()  # nobody sets the password of an existing account here
    response = client.post(link, {"new_password1": "x-other-pass-99", "new_password2": "x-other-pass-99"})
    assert not Membership.objects.filter(organization=tenant.organization, user__email="pat@example.com").exists()
    response = client.post("/login/", {"username": "pat@example.com", "password": PASSWORD, "next": link})
    assert response.status_code == 302 and response["Location"] == link
    assert client.post(link).status_code == 302
    assert Membership.objects.filter(organization=tenant.organization, user__email="pat@example.com").exists()


def test_a_new_person_chooses_a_password_then_signs_in_with_it(tenant):
    _, link = invite(tenant, "newbie@example.com")
    client = Client()
    page = client.get(link)
    assert page.status_code == 200 and "new_password1" in page.content.decode()
    weak = client.post(link, {"new_password1": "abc", "new_password2": "abc"})
    assert weak.status_code == 400 and not User.objects.filter(email="newbie@example.com").exists()
    response = client.post(link, {"new_password1": PASSWORD, "new_password2": PASSWORD})
    assert response.status_code == 302 and client.get("/").status_code == 200
    client.post("/logout/")
    fresh = Client()
    response = fresh.post("/login/", {"username": "newbie@example.com", "password": PASSWORD})
    assert response.status_code == 302
    assert fresh.get("/").status_code == 200
    assert Membership.objects.get(user__email="newbie@example.com").organization == tenant.organization


@pytest.mark.parametrize("state, code", [("expired", "invitation_expired"), ("revoked", "invitation_revoked")])
def test_closed_links_say_why(tenant, state, code):
    invitation, link = invite(tenant, "pat@example.com")
    if state == "expired":
        Invitation.objects.filter(pk=invitation.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    else:
        invitations.revoke(invitation)
    pat = signed_in("pat@example.com")
    for response in (pat.get(link), pat.post(link), Client().get(link)):
        assert response.status_code == 410 and code in response.content.decode()
    assert not Membership.objects.filter(user=pat.user, organization=tenant.organization).exists()


def test_members_page_resends_and_revokes(tenant, owner, other_tenant):
    owner.post("/settings/members/invite/", {"email": "pat@example.com", "role": "viewer"})
    invitation = Invitation.objects.get(organization=tenant.organization, email="pat@example.com")
    first_link = re.search(r"(/invitation/\S+/)", mail.outbox[-1].body).group(1)
    page = owner.get("/settings/members/").content.decode()
    assert "pat@example.com" in page and f"/settings/invitations/{invitation.pk}/revoke/" in page
    assert owner.post(f"/settings/invitations/{invitation.pk}/resend/").status_code == 302
    assert len(mail.outbox) == 2 and Client().get(first_link).status_code == 404
    assert owner.post(f"/settings/invitations/{invitation.pk}/revoke/").status_code == 302
    invitation.refresh_from_db()
    assert invitation.revoked_at is not None
    assert {"invitation.create", "invitation.resend", "invitation.revoke"} <= set(
        AuditEvent.objects.filter(organization=tenant.organization).values_list("action", flat=True))
    theirs, _ = invite(other_tenant, "their@example.com")
    assert owner.post(f"/settings/invitations/{theirs.pk}/resend/").status_code == 404
    assert owner.post(f"/settings/invitations/{theirs.pk}/revoke/").status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None and theirs.send_count == 1


def test_the_members_page_refuses_too_many_invitations(tenant, owner, settings):
    settings.INVITATIONS_PER_ORGANIZATION_PER_HOUR = 1
    assert owner.post("/settings/members/invite/", {"email": "a@example.com"}).status_code == 302
    response = owner.post("/settings/members/invite/", {"email": "b@example.com"})
    assert response.status_code == 429 and "Too many invitations" in response.content.decode()


def test_operators_resend_and_revoke_in_the_admin(tenant):
    invitation, _ = invite(tenant, "pat@example.com")
    operator = User.objects.create_superuser(email="operator@example.com", password=PASSWORD)
    client = Client()
    client.force_login(operator)
    page = client.get("/admin/accounts/invitation/")
    assert page.status_code == 200 and "pat@example.com" in page.content.decode()
    detail = client.get(f"/admin/accounts/invitation/{invitation.pk}/change/").content.decode()
    assert invitation.token_hash not in detail
    client.post("/admin/accounts/invitation/", {"action": "resend", "_selected_action": [str(invitation.pk)]})
    invitation.refresh_from_db()
    assert invitation.send_count == 2 and len(mail.outbox) == 2
    client.post("/admin/accounts/invitation/", {"action": "revoke", "_selected_action": [str(invitation.pk)]})
    invitation.refresh_from_db()
    assert invitation.revoked_at is not None
    assert AuditEvent.objects.filter(organization=tenant.organization, action="invitation.revoke",
                                     actor_user=operator).exists()
