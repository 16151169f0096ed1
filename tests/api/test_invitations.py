"""/api/v1/invitations/: invite, list, resend, revoke; quotas; codes. (Accepting is the
link's page: tests/web/test_invitations.py; the consent guarantees: tests/security.)"""

import re
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from apps.accounts import invitations as links
from apps.accounts.models import AuditEvent, Invitation, Membership
from tests.api.conftest import error_of


def link_in(message):
    return re.search(r"https?://\S+(/invitation/\S+/)", message.body).group(1)


def token_of(message):
    return link_in(message).rstrip("/").rsplit("/", 1)[-1]


def test_invite_lists_and_reads(api, tenant):
    response = api.post("/api/v1/invitations/", {"email": "New@Example.com", "role": "viewer",
                                                  "projects": [str(tenant.project.pk)]})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert (body["email"], body["role"], body["projects"], body["status"], body["send_count"]) == (
        "new@example.com", "viewer", [str(tenant.project.pk)], "pending", 1)
    invitation = Invitation.objects.get(pk=body["id"])
    assert invitation.expires_at - invitation.created_at == timedelta(days=7)
    [message] = mail.outbox
    assert message.to == ["new@example.com"] and tenant.organization.name in message.subject
    token = token_of(message)
    assert invitation.token_hash == links.hash_token(token) and token not in str(invitation.__dict__)
    assert [row["id"] for row in api.get("/api/v1/invitations/").json()["results"]] == [body["id"]]
    assert api.get(f"/api/v1/invitations/{body['id']}/").json()["email"] == "new@example.com"
    assert api.get("/api/v1/invitations/?status=accepted").json()["results"] == []
    assert len(api.get("/api/v1/invitations/?status=pending").json()["results"]) == 1
    wrong = api.get("/api/v1/invitations/?status=sideways")
    assert wrong.status_code == 400 and error_of(wrong)["code"] == "invalid_choice"
    event = AuditEvent.objects.get(organization=tenant.organization, action="invitation.create")
    assert event.target_id == body["id"] and event.data["email"] == "new@example.com"


def test_resend_sends_a_new_link_and_the_old_one_stops_working(api, tenant, client):
    created = api.post("/api/v1/invitations/", {"email": "again@example.com"}).json()
    old = link_in(mail.outbox[0])
    Invitation.objects.filter(pk=created["id"]).update(expires_at=timezone.now() - timedelta(minutes=1))
    assert api.get(f"/api/v1/invitations/{created['id']}/").json()["status"] == "expired"
    response = api.post(f"/api/v1/invitations/{created['id']}/resend/")
    assert response.status_code == 200, response.json()
    assert (response.json()["status"], response.json()["send_count"]) == ("pending", 2)
    new = link_in(mail.outbox[1])
    assert new != old
    assert client.get(old).status_code == 404  # invitation_invalid: only the new hash is kept
    assert client.get(new).status_code == 200
    assert AuditEvent.objects.filter(organization=tenant.organization, action="invitation.resend").exists()


def test_revoke_closes_the_link(api, tenant, client):
    created = api.post("/api/v1/invitations/", {"email": "gone@example.com"}).json()
    link = link_in(mail.outbox[0])
    response = api.post(f"/api/v1/invitations/{created['id']}/revoke/")
    assert response.status_code == 200 and response.json()["status"] == "revoked"
    assert api.post(f"/api/v1/invitations/{created['id']}/revoke/").status_code == 200  # twice: no change
    assert AuditEvent.objects.filter(organization=tenant.organization, action="invitation.revoke").count() == 1
    page = client.get(link)
    assert page.status_code == 410 and "invitation_revoked" in page.content.decode()
    response = api.post(f"/api/v1/invitations/{created['id']}/resend/")
    assert response.status_code == 409 and error_of(response)["code"] == "invitation_closed"
    # The address may be invited again once the old invitation is closed.
    assert api.post("/api/v1/invitations/", {"email": "gone@example.com"}).status_code == 201


def test_an_expired_invitation_is_replaced_by_a_new_one(api, tenant):
    first = api.post("/api/v1/invitations/", {"email": "late@example.com"}).json()
    assert api.post("/api/v1/invitations/", {"email": "late@example.com"}).status_code == 409
    Invitation.objects.filter(pk=first["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    second = api.post("/api/v1/invitations/", {"email": "late@example.com"})
    assert second.status_code == 201
    assert Invitation.objects.get(pk=first["id"]).revoked_at is not None


def test_only_owners_invite_owners_and_limits_are_for_lower_roles(tenant, member_client):
    admin = member_client(tenant, "admin")
    response = admin.post("/api/v1/invitations/", {"email": "boss@example.com", "role": "owner"})
    assert response.status_code == 403
    response = admin.post("/api/v1/invitations/", {"email": "a@example.com", "role": "admin",
                                                    "projects": [str(tenant.project.pk)]})
    assert response.status_code == 400 and "projects" in error_of(response)["fields"]
    owner = member_client(tenant, "owner")
    created = owner.post("/api/v1/invitations/", {"email": "boss@example.com", "role": "owner"}).json()
    assert admin.post(f"/api/v1/invitations/{created['id']}/revoke/").status_code == 403
    assert admin.post(f"/api/v1/invitations/{created['id']}/resend/").status_code == 403
    developer = member_client(tenant, "developer")
    assert developer.get("/api/v1/invitations/").status_code == 403
    assert developer.post("/api/v1/invitations/", {"email": "x@example.com"}).status_code == 403
    assert developer.post("/api/v1/members/", {"email": "x@example.com"}).status_code == 403


def test_unknown_fields_and_bad_addresses_are_400(api):
    response = api.post("/api/v1/invitations/", {"email": "not an address"})
    assert response.status_code == 400 and error_of(response)["fields"]["email"]
    response = api.post("/api/v1/invitations/", {"email": "a@example.com", "user": "x"})
    assert response.status_code == 400 and error_of(response)["code"] == "unknown_field"


@pytest.fixture
def small_quotas(settings):
    settings.INVITATIONS_PER_ADDRESS_PER_HOUR = 2
    settings.INVITATIONS_PER_ORGANIZATION_PER_HOUR = 3


def test_resending_to_one_address_is_limited(api, small_quotas):
    created = api.post("/api/v1/invitations/", {"email": "spam@example.com"}).json()
    assert api.post(f"/api/v1/invitations/{created['id']}/resend/").status_code == 200
    response = api.post(f"/api/v1/invitations/{created['id']}/resend/")
    assert response.status_code == 429
    assert error_of(response)["code"] == "too_many_invitations"
    assert 1 <= int(response["Retry-After"]) <= 3600
    assert len(mail.outbox) == 2


def test_an_organization_sends_a_limited_number(api, tenant, other_tenant, small_quotas):
    for n in range(3):
        assert api.post("/api/v1/invitations/", {"email": f"p{n}@example.com"}).status_code == 201
    response = api.post("/api/v1/members/", {"email": "p9@example.com"})
    assert response.status_code == 429 and int(response["Retry-After"]) >= 1
    assert not Invitation.objects.filter(email="p9@example.com").exists()
    # Another organization's quota is its own.
    from apps.api.accounts import invitations

    invitations.invite(other_tenant.organization, email="p9@example.com", role="viewer", project_ids=None)


def test_members_post_answers_202_with_the_invitation_and_no_user_id(api, tenant):
    response = api.post("/api/v1/members/", {"email": "someone@example.com", "role": "viewer"})
    assert response.status_code == 202
    body = response.json()
    assert Invitation.objects.filter(pk=body["id"], organization=tenant.organization).exists()
    assert body["status"] == "pending" and "user" not in body
    assert not Membership.objects.filter(user__email="someone@example.com").exists()
