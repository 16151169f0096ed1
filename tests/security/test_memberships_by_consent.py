"""Memberships only by consent (issue 33): an organization cannot make someone's existing
account its member, so it cannot put that person under its policies (SSO required) nor
learn from the answer whether an address has an account."""

import re

from django.core import mail
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from apps.accounts.models import Invitation, Membership, OrganizationSSO, User

PASSWORD = "correct horse battery"


def test_inviting_an_existing_account_does_not_make_it_a_member(tenant, other_tenant, other_api):
    """The old takeover: B adds A's person through POST /members/, requires SSO, and the
    person can no longer log in with their password. Now B only has a pending invitation."""
    victim = tenant.owner
    victim.set_password(PASSWORD)
    victim.save()
    response = other_api.post("/api/v1/members/", {"email": victim.email, "role": "viewer"})
    assert response.status_code == 202
    assert str(victim.pk) not in response.content.decode()
    assert not Membership.objects.filter(user=victim, organization=other_tenant.organization).exists()
    assert victim.email not in [m["email"] for m in other_api.get("/api/v1/members/").json()["results"]]
    OrganizationSSO.objects.create(organization=other_tenant.organization, issuer="https://idp.example.com",
                                   client_id="x", client_secret="y", allowed_domains="example.com", required=True)
    client = Client()
    assert client.post("/login/", {"username": victim.email, "password": PASSWORD}).status_code == 302
    assert client.get("/").status_code == 200


def _invite(api, email):
    mail.outbox.clear()
    with CaptureQueriesContext(connection) as queries:
        response = api.post("/api/v1/invitations/", {"email": email, "role": "viewer"})
    assert response.status_code == 201
    return response, [q["sql"] for q in queries.captured_queries], mail.outbox[0]


def _statement(sql):
    """The statement without its values (addresses, ids, times, savepoint names)."""
    return re.sub(r'"s\d+_x\d+"', "?", re.sub(r"'[^']*'", "?", sql))


def _shape(response, email):
    body = {k: v for k, v in response.json().items()
            if k not in {"id", "created_at", "expires_at", "last_sent_at"}}
    body["email"] = body["email"].replace(email, "<address>")
    return body, sorted(k for k in response.headers if not k.lower().startswith("x-ratelimit"))


def _normalized(message, email):
    return re.sub(r"/invitation/\S+/", "/invitation/<token>/", message.body).replace(email, "<address>"), \
        message.subject


def test_the_answer_is_the_same_whether_or_not_the_address_has_an_account(api, other_tenant):
    known = other_tenant.owner.email  # an account, and a member elsewhere
    unknown = "nobody-has-this@example.com"
    assert not User.objects.filter(email=unknown).exists()
    api.get("/api/v1/invitations/")  # the API key's cache warmed: both calls below start alike
    known_response, known_queries, known_mail = _invite(api, known)
    unknown_response, unknown_queries, unknown_mail = _invite(api, unknown)
    assert _shape(known_response, known) == _shape(unknown_response, unknown)
    assert _normalized(known_mail, known) == _normalized(unknown_mail, unknown)
    # The same statements (no lookup of the address among accounts: no timing difference).
    assert len(known_queries) == len(unknown_queries)
    assert [_statement(q) for q in known_queries] == [_statement(q) for q in unknown_queries]
    assert str(other_tenant.owner.pk) not in known_response.content.decode()
    assert not User.objects.filter(email=unknown).exists()  # no account is made before they accept


def test_an_accepted_invitation_is_the_only_way_in(tenant, other_tenant, other_api):
    """The person chooses: accepting B's invitation (signed in as themselves) makes them a
    member of B too; nothing else does."""
    person = tenant.owner
    other_api.post("/api/v1/invitations/", {"email": person.email, "role": "viewer"})
    link = re.search(r"(/invitation/\S+/)", mail.outbox[-1].body).group(1)
    client = Client()
    client.force_login(person)
    assert client.get(link).status_code == 200
    assert not Membership.objects.filter(user=person, organization=other_tenant.organization).exists()
    assert client.post(link).status_code == 302
    assert Membership.objects.get(user=person, organization=other_tenant.organization).role == "viewer"
    assert Invitation.objects.get(organization=other_tenant.organization).accepted_by == person


def test_direct_adds_nobody_could_use_become_invitations(tenant):
    """Migration accounts.0010: the old path's passwordless, never signed-in members are
    turned into expired invitations (resend gives them a link); real members stay."""
    import importlib

    from django.apps import apps
    from guardian.shortcuts import assign_perm

    from apps.api.accounts import invitations
    from apps.projects.models import Project

    migration = importlib.import_module("apps.accounts.migrations.0010_direct_adds_become_invitations")
    other = Project.objects.create(organization=tenant.organization, name="Other", slug="other")
    shell = User.objects.create_user(email="Shell@example.com")  # no password, never signed in
    Membership.objects.create(user=shell, organization=tenant.organization, role="viewer", limited_to_projects=True)
    assign_perm("projects.access_project", shell, other)
    real = User.objects.create_user(email="real@example.com", password=PASSWORD)
    Membership.objects.create(user=real, organization=tenant.organization, role="developer")
    owner_shell = User.objects.create_user(email="owner-shell@example.com")
    Membership.objects.create(user=owner_shell, organization=tenant.organization, role="owner")

    migration.convert(apps, None)

    assert not Membership.objects.filter(user=shell).exists()
    assert not shell.has_perm("projects.access_project", other)
    assert Membership.objects.filter(user=real).exists() and Membership.objects.filter(user=owner_shell).exists()
    invitation = Invitation.objects.get(organization=tenant.organization, email="shell@example.com")
    assert (invitation.role, invitation.status(), invitations.project_ids(invitation)) == (
        "viewer", "expired", [str(other.pk)])
    invitations.resend(invitation)  # the members page's Resend: a link that works
    link = re.search(r"(/invitation/\S+/)", mail.outbox[-1].body).group(1)
    client = Client()
    assert client.post(link, {"new_password1": PASSWORD, "new_password2": PASSWORD}).status_code == 302
    membership = Membership.objects.get(user=shell, organization=tenant.organization)
    assert membership.role == "viewer" and membership.limited_to_projects
    assert User.objects.get(pk=shell.pk).check_password(PASSWORD)
