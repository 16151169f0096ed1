"""Single sign-on without a provider: "SSO required" and the owners' break-glass password
log-in, the owner's settings page (secret encrypted at rest, roles, tenancy), the admin, and
the sign-in page's refusals. The flow through a real provider is test_sso_provider.py."""

import pytest
from django.db import connection
from django.test import Client

from apps.accounts.models import AuditEvent, Membership, OrganizationSSO, User

PASSWORD = "correct horse battery"


def configure(tenant, **fields):
    values = {"issuer": "https://idp.example.com", "client_id": "cronsvc", "client_secret": "s3cret-at-rest",
              "allowed_domains": "example.com", "default_role": "viewer"}
    values.update(fields)
    return OrganizationSSO.objects.create(organization=tenant.organization, **values)


def member(tenant, role, email=None):
    user = User.objects.create_user(email=email or f"{role}-{tenant.organization.slug}@example.com", password=PASSWORD)
    Membership.objects.create(user=user, organization=tenant.organization, role=role)
    return user


def password_login(user):
    client = Client()
    return client, client.post("/login/", {"username": user.email, "password": PASSWORD})


def test_a_member_of_an_organization_requiring_sso_cannot_log_in_with_a_password(tenant):
    configure(tenant, required=True)
    developer = member(tenant, "developer")

    client, response = password_login(developer)

    assert response.status_code == 403
    assert 'data-code="sso_required"' in response.content.decode() and "Sign in with SSO" in response.content.decode()
    assert client.get("/").status_code == 302  # still logged out
    assert AuditEvent.objects.filter(organization=tenant.organization, action="sso.password_login_refused",
                                     target_id=str(developer.pk)).exists()


def test_password_log_ins_go_on_while_sso_is_optional_or_disabled(tenant):
    config = configure(tenant, required=False)
    developer = member(tenant, "developer")
    assert password_login(developer)[1].status_code == 302
    config.required, config.enabled = True, False
    config.save()
    assert password_login(developer)[1].status_code == 302


def test_an_owner_logs_in_with_a_password_as_the_audited_break_glass_way(tenant):
    configure(tenant, required=True)
    tenant.owner.set_password(PASSWORD)
    tenant.owner.save()

    client, response = password_login(tenant.owner)

    assert response.status_code == 302 and client.get("/").status_code == 200
    assert AuditEvent.objects.filter(organization=tenant.organization, action="sso.break_glass_login").exists()


def test_the_owner_configures_sso_and_the_secret_is_encrypted_at_rest(tenant, owner, settings):
    settings.SITE_URL = "https://cron.example.com"
    page = owner.get("/settings/sso/")
    assert page.status_code == 200 and "https://cron.example.com/sso/callback/" in page.content.decode()

    response = owner.post("/settings/sso/", {
        "issuer": "https://idp.example.com/realms/main/", "client_id": "cronsvc", "client_secret": "s3cret-at-rest",
        "allowed_domains": "Example.com, example.org", "default_role": "developer", "enabled": "on", "required": "on"})

    assert response.status_code == 302
    config = OrganizationSSO.objects.get(organization=tenant.organization)
    assert (config.issuer, config.domains, config.default_role, config.required) == (
        "https://idp.example.com/realms/main", ["example.com", "example.org"], "developer", True)
    assert config.client_secret == "s3cret-at-rest"
    with connection.cursor() as cursor:
        cursor.execute("SELECT client_secret FROM accounts_organizationsso WHERE id = %s", [config.pk])
        assert "s3cret" not in cursor.fetchone()[0]
    assert "s3cret-at-rest" not in owner.get("/settings/sso/").content.decode()
    # Saved again without a secret: the secret is kept.
    owner.post("/settings/sso/", {"issuer": config.issuer, "client_id": "cronsvc2", "allowed_domains": "example.com",
                                  "default_role": "viewer", "enabled": "on"})
    config.refresh_from_db()
    assert (config.client_id, config.client_secret, config.required) == ("cronsvc2", "s3cret-at-rest", False)
    assert AuditEvent.objects.filter(organization=tenant.organization, action="sso.configuration_saved").count() == 2


@pytest.mark.parametrize("fields, field_id", [
    ({"issuer": "not a url"}, "sso-issuer"),
    ({"allowed_domains": " , "}, "sso-domains"),
    ({"default_role": "owner"}, "sso-role"),  # an identity provider never mints owners
    ({"client_secret": ""}, "sso-client-secret"),
])
def test_bad_settings_are_refused_field_by_field(owner, fields, field_id):
    data = {"issuer": "https://idp.example.com", "client_id": "cronsvc", "client_secret": "x",
            "allowed_domains": "example.com", "default_role": "viewer"}
    data.update(fields)
    response = owner.post("/settings/sso/", data)
    assert response.status_code == 400 and f'id="{field_id}-error"' in response.content.decode()
    assert not OrganizationSSO.objects.exists()


def test_only_the_owner_sees_the_settings_and_only_their_own(tenant, other_tenant, web_client):
    configure(other_tenant, client_id="their-client")
    for role in ("admin", "developer"):
        assert web_client(tenant, role).get("/settings/sso/").status_code == 403
    page = web_client(tenant).get("/settings/sso/").content.decode()
    assert "their-client" not in page


def test_the_owner_turns_sso_off(tenant, owner):
    configure(tenant, required=True)
    assert owner.post("/settings/sso/", {"action": "delete"}).status_code == 302
    assert not OrganizationSSO.objects.filter(organization=tenant.organization).exists()


def test_the_sign_in_page_explains_an_unknown_or_ambiguous_domain(tenant, other_tenant):
    client = Client()
    assert client.get("/sso/").status_code == 200
    unknown = client.post("/sso/", {"identifier": "bob@nowhere.test"})
    assert unknown.status_code == 400 and 'data-code="sso_not_configured"' in unknown.content.decode()
    configure(tenant, allowed_domains="shared.test")
    configure(other_tenant, allowed_domains="shared.test, other.test")
    ambiguous = client.post("/sso/", {"identifier": "bob@shared.test"})
    assert ambiguous.status_code == 400 and 'data-code="sso_ambiguous_domain"' in ambiguous.content.decode()


def test_an_unreachable_provider_is_a_clear_refusal_not_a_500(tenant, settings):
    settings.SSO_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    configure(tenant, issuer="http://127.0.0.1:9/")  # nothing listens on the discard port
    response = Client().post("/sso/", {"identifier": tenant.organization.slug})
    assert response.status_code == 400 and 'id="sso-error-code">sso_provider_unreachable<' in response.content.decode()


def test_a_provider_on_a_private_address_is_refused_by_the_outbound_guard(tenant):
    configure(tenant, issuer="http://127.0.0.1:8080/")
    response = Client().post("/sso/", {"identifier": tenant.organization.slug})
    assert response.status_code == 400 and "sso_provider_unreachable" in response.content.decode()
    assert AuditEvent.objects.filter(organization=tenant.organization, action="sso.refused").exists()


def test_a_callback_without_a_sign_in_under_way_is_a_state_mismatch(db):
    response = Client().get("/sso/callback/?code=abc&state=nothing")
    assert response.status_code == 400 and 'id="sso-error-code">sso_state_mismatch<' in response.content.decode()


def test_operators_edit_sso_in_the_admin_without_seeing_the_secret(tenant, client):
    config = configure(tenant)
    admin = User.objects.create_superuser(email="operator@example.com", password=PASSWORD)
    client.force_login(admin)
    page = client.get(f"/admin/accounts/organizationsso/{config.pk}/change/")
    assert page.status_code == 200 and "s3cret-at-rest" not in page.content.decode()
    assert client.get("/admin/accounts/organizationsso/").status_code == 200
    assert client.get("/admin/accounts/organizationsso/add/").status_code == 200
    saved = client.post(f"/admin/accounts/organizationsso/{config.pk}/change/", {
        "organization": str(tenant.organization.pk), "enabled": "on", "issuer": config.issuer, "client_id": "new-id",
        "client_secret": "", "allowed_domains": "example.com", "default_role": "developer"})
    assert saved.status_code == 302
    config.refresh_from_db()
    assert (config.client_id, config.client_secret) == ("new-id", "s3cret-at-rest")  # empty field: secret kept


def test_an_invited_member_of_an_organization_requiring_sso_is_sent_to_sso(tenant):
    from apps.accounts import invitations as links
    from apps.api.accounts import invitations

    configure(tenant, required=True)
    invitation = invitations.invite(tenant.organization, email="invited@example.com", role="developer",
                                    project_ids=None)
    token, _ = links.new_token()
    invitation.token_hash = links.hash_token(token)
    invitation.save(update_fields=["token_hash"])
    client = Client()

    response = client.post(f"/invitation/{token}/", {"new_password1": PASSWORD, "new_password2": PASSWORD})

    assert response.status_code == 302 and response["Location"] == f"/sso/?org={tenant.organization.slug}"
    assert Membership.objects.filter(user__email="invited@example.com", organization=tenant.organization).exists()
    assert client.get("/").status_code == 302  # not logged in by the password


def sso_claims(sub="subject-1", email="pat@example.com"):
    return {"sub": sub, "email": email, "given_name": "Pat"}


def test_a_provider_cannot_take_over_an_account_that_reaches_other_organizations(tenant, other_tenant):
    from apps.accounts import sso

    config = configure(tenant)
    victim = member(other_tenant, "owner", email="pat@example.com")

    with pytest.raises(sso.SSOError) as refused:
        sso.provision(config, "pat@example.com", sso_claims())
    assert refused.value.code == "sso_account_exists"
    assert not Membership.objects.filter(user=victim, organization=tenant.organization).exists()
    operator = User.objects.create_superuser(email="root@example.com", password=PASSWORD)
    with pytest.raises(sso.SSOError):
        sso.provision(config, "root@example.com", sso_claims(sub="subject-2", email="root@example.com"))
    assert not operator.sso_identities.exists()


def test_the_person_logged_in_connects_their_account_and_is_found_by_subject_afterwards(tenant, other_tenant):
    from apps.accounts import sso

    config = configure(tenant)
    pat = member(other_tenant, "owner", email="pat@example.com")

    first = sso.provision(config, "pat@example.com", sso_claims(), signed_in_user=pat)
    assert first.user == pat and first.created_membership and first.membership.role == "viewer"
    # Later, without a session, and even with another e-mail address at the provider: the link decides.
    again = sso.provision(config, "patricia@example.com", sso_claims())
    assert again.user == pat and not again.created_membership and not again.created_user


def test_an_account_reaching_only_this_organization_is_linked_at_its_first_sign_in(tenant):
    from apps.accounts import sso

    config = configure(tenant)
    pat = member(tenant, "developer", email="pat@example.com")
    sign_in = sso.provision(config, "pat@example.com", sso_claims())
    assert sign_in.user == pat and sign_in.membership.role == "developer"  # the role is never changed
    assert AuditEvent.objects.filter(organization=tenant.organization, action="sso.identity_linked").exists()


def test_starting_sign_ins_is_bounded_per_address(db, monkeypatch):
    from apps.web.views import sso as sso_views

    monkeypatch.setattr(sso_views, "SSO_STARTS_PER_IP", 2)
    client = Client()
    assert [client.post("/sso/", {"identifier": "x@nowhere.test"}).status_code for _ in range(3)] == [400, 400, 429]
    assert 'id="sso-error-code">sso_rate_limited<' in client.post("/sso/", {"identifier": "x"}).content.decode()


def test_one_organizations_required_sso_does_not_lock_the_person_out_of_another(tenant, other_tenant):
    """B requires SSO; the person is a developer in A and in B: their password log-in opens A
    (the page and the API) and only acting in B is refused, with the reason."""
    configure(other_tenant, required=True)
    person = member(tenant, "developer", email="both@example.com")
    Membership.objects.create(user=person, organization=other_tenant.organization, role="developer")

    client, response = password_login(person)

    assert response.status_code == 302 and client.get("/").status_code == 200
    a, b = str(tenant.organization.pk), str(other_tenant.organization.pk)
    assert client.get("/api/v1/jobs/", HTTP_X_ORGANIZATION=a).status_code == 200
    refused = client.get("/api/v1/jobs/", HTTP_X_ORGANIZATION=b)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "sso_required"
    switched = client.post("/organization/switch/", {"organization": b}, follow=True)
    assert "sso_required" in switched.content.decode()
    page = client.get("/").content.decode()
    assert tenant.organization.name in page and other_tenant.organization.name not in page
    # B's owner, by the break-glass rule, still acts in B after a password log-in.
    Membership.objects.filter(user=person, organization=other_tenant.organization).update(role="owner")
    assert client.get("/api/v1/jobs/", HTTP_X_ORGANIZATION=b).status_code == 200


def test_a_password_session_stops_reaching_an_organization_once_it_requires_sso(tenant, other_tenant):
    person = member(tenant, "developer", email="both@example.com")
    Membership.objects.create(user=person, organization=other_tenant.organization, role="admin")
    client, _ = password_login(person)
    b = str(other_tenant.organization.pk)
    assert client.get("/api/v1/jobs/", HTTP_X_ORGANIZATION=b).status_code == 200

    configure(other_tenant, required=True)

    assert client.get("/api/v1/jobs/", HTTP_X_ORGANIZATION=b).status_code == 403


def test_the_owner_says_whether_the_provider_enforces_mfa(tenant, owner):
    configure(tenant)
    page = owner.get("/settings/sso/").content.decode()
    assert 'name="idp_enforces_mfa"' in page
    owner.post("/settings/sso/", {"issuer": "https://idp.example.com", "client_id": "cronsvc",
                                  "allowed_domains": "example.com", "default_role": "viewer", "enabled": "on",
                                  "idp_enforces_mfa": "on"})
    config = OrganizationSSO.objects.get(organization=tenant.organization)
    assert config.idp_enforces_mfa
    event = AuditEvent.objects.filter(organization=tenant.organization, action="sso.configuration_saved").last()
    assert event.data["idp_enforces_mfa"] is True
