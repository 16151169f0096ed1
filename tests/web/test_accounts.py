"""Sign-up, log-in (rate limited), log-out, password reset and invitations."""

import re

import pytest
from django.core import mail
from django.test import Client

from apps.accounts.models import Membership, Organization, User
from apps.projects.models import Project
from tests.conftest import ensure_seeded_plans


@pytest.fixture
def plans(db):
    ensure_seeded_plans()


def signup(client, **overrides):
    data = {"organization": "Acme Rockets", "email": "Founder@Example.com", "password1": "a-long-enough-pass",
            "password2": "a-long-enough-pass"}
    data.update(overrides)
    return client.post("/signup/", data)


def test_signup_creates_user_free_organization_default_project_and_shows_the_key_once(plans):
    client = Client()
    response = signup(client)
    assert response.status_code == 302 and response["Location"] == "/welcome/"  # Post/Redirect/Get
    response = client.get("/welcome/")
    assert response.status_code == 200
    user = User.objects.get(email="founder@example.com")
    membership = Membership.objects.get(user=user)
    assert membership.role == "owner"
    org = membership.organization
    assert org.name == "Acme Rockets" and org.plan.code == "free"
    assert Project.objects.for_organization(org).filter(slug="default").exists()
    body = response.content.decode()
    assert "csk_live_" in body and "shown <strong>once</strong>" in body
    assert client.get("/").status_code == 200  # logged in
    reloaded = client.get("/welcome/").content.decode()  # a reload re-posts nothing and shows no key
    assert "csk_live_" not in reloaded and "was shown once" in reloaded
    assert Organization.objects.filter(name="Acme Rockets").count() == 1


def test_signup_refuses_a_taken_email_and_weak_or_mismatched_passwords(plans, tenant):
    response = signup(Client(), email=tenant.owner.email)
    assert response.status_code == 400
    assert "An account with this e-mail address exists" in response.content.decode()
    response = signup(Client(), password1="short", password2="short")
    assert "too short" in response.content.decode()
    response = signup(Client(), password2="something-else-entirely")
    assert "The two passwords differ." in response.content.decode()
    assert Organization.objects.filter(name="Acme Rockets").count() == 0


def test_login_and_logout(tenant):
    tenant.owner.set_password("correct horse battery")
    tenant.owner.save()
    client = Client()
    assert client.get("/").status_code == 302  # anonymous: to the log-in page
    assert client.get("/")["Location"].startswith("/login/")
    response = client.post("/login/", {"username": tenant.owner.email, "password": "correct horse battery"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert client.get("/").status_code == 200
    assert client.post("/logout/").status_code == 302
    assert client.get("/").status_code == 302


def test_wrong_password_is_refused_with_a_message(tenant):
    response = Client().post("/login/", {"username": tenant.owner.email, "password": "nope"})
    assert response.status_code == 400
    assert "Please enter a correct e-mail address and password" in response.content.decode()


def test_login_failures_are_limited_per_account(tenant, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT_ANY_IP = 3  # the per-account count across addresses
    tenant.owner.set_password("correct horse battery")
    tenant.owner.save()
    for n in range(3):
        client = Client(REMOTE_ADDR=f"10.0.0.{n + 1}")  # different addresses: the account counter decides
        assert client.post("/login/", {"username": tenant.owner.email, "password": "wrong"}).status_code == 400
    response = Client(REMOTE_ADDR="10.0.0.9").post(
        "/login/", {"username": tenant.owner.email.upper(), "password": "correct horse battery"})
    assert response.status_code == 429
    assert "Too many failed log-in attempts" in response.content.decode()


def test_login_failures_are_limited_per_ip(tenant, settings):
    settings.LOGIN_FAILURES_PER_IP = 2
    tenant.owner.set_password("correct horse battery")
    tenant.owner.save()
    client = Client(REMOTE_ADDR="192.0.2.7")
    for n in range(2):
        client.post("/login/", {"username": f"someone{n}@example.com", "password": "wrong"})
    response = client.post("/login/", {"username": tenant.owner.email, "password": "correct horse battery"})
    assert response.status_code == 429
    other_ip = Client(REMOTE_ADDR="192.0.2.8")
    assert other_ip.post("/login/", {"username": tenant.owner.email,
                                     "password": "correct horse battery"}).status_code == 302


def test_password_reset_by_email(tenant):
    tenant.owner.set_password("old password 123")
    tenant.owner.save()
    client = Client()
    response = client.post("/password-reset/", {"email": tenant.owner.email})
    assert response.status_code == 302
    assert len(mail.outbox) == 1
    link = re.search(r"http://testserver(/password-reset/\S+/)", mail.outbox[0].body).group(1)
    response = client.get(link, follow=True)
    assert "Choose a new password" in response.content.decode()
    form_url = response.redirect_chain[-1][0]
    response = client.post(form_url, {"new_password1": "brand new pass 456", "new_password2": "brand new pass 456"})
    assert response.status_code == 302
    tenant.owner.refresh_from_db()
    assert tenant.owner.check_password("brand new pass 456")


def test_password_reset_of_an_unknown_address_says_the_same_and_sends_nothing(db):
    response = Client().post("/password-reset/", {"email": "nobody@example.com"})
    assert response.status_code == 302
    assert mail.outbox == []


def test_invitation_e_mail_and_acceptance(tenant, owner):
    response = owner.post("/settings/members/invite/", {"email": "New.Person@example.com", "role": "developer"})
    assert response.status_code == 302
    (message,) = mail.outbox
    assert tenant.organization.name in message.subject
    link = re.search(r"https?://[^/\s]+(/invitation/\S+/)", message.body).group(1)
    invited = Client()
    page = invited.get(link)
    assert page.status_code == 200 and tenant.organization.name in page.content.decode()
    response = invited.post(link, {"new_password1": "my own pass 789", "new_password2": "my own pass 789"})
    assert response.status_code == 302 and response["Location"] == "/"
    assert invited.get("/").status_code == 200
    user = User.objects.get(email="new.person@example.com")
    assert user.check_password("my own pass 789")
    assert Membership.objects.get(user=user).organization == tenant.organization
    # The link works once.
    page = Client().get(link)
    assert page.status_code == 410 and "invitation_used" in page.content.decode()


def test_a_broken_invitation_link_is_explained(db):
    response = Client().get("/invitation/nonsense-token/")
    assert response.status_code == 404
    assert "invitation link does not work" in response.content.decode()
    assert "invitation_invalid" in response.content.decode()
