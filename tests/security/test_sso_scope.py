"""Single sign-on scoped to its organization, end to end against the real OpenID Connect
provider (tests/support/oidc_provider/, its own process) with two organizations.

- The takeover of issue 33: organization A's provider links Alice; A removes her; B invites
  her; A's provider must not sign her in any more (before the fix it did, password and TOTP
  skipped, and the session could mint an API key in B).
- A session opened by A's provider acts in A only, never in the person's other
  organization B (API by session, pages, the organization switcher).
- A person with a confirmed TOTP device gives their code after the provider, unless A says
  its provider enforces multi-factor authentication.
"""

import time

import pytest
import requests
from django_otp.oath import TOTP

from apps.accounts.models import ApiKey, EncryptedTOTPDevice, Membership, SSOIdentity, User
from tests.support.idp import sign_in_at_provider
from tests.web.test_sso_provider import (  # noqa: F401 - the provider (Alice at example.com) and its reachability
    PASSWORD,
    _provider_reachable,
    configure,
    provider,
    refusal_code,
    start_sso,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ALICE = "alice@example.com"
HER_PASSWORD = "alices-own-password-1"


def sso_callback(live_server, provider, organization, browser=None):
    """A's provider signs Alice in: cronsvc's answer to the provider's redirect (not followed)."""
    browser = browser or requests.Session()
    to_provider = start_sso(live_server, browser, organization.slug)
    assert to_provider.status_code == 302, to_provider.text[:500]
    back = sign_in_at_provider(browser, to_provider, ALICE, PASSWORD)
    return browser, browser.get(back.headers["Location"], allow_redirects=False, timeout=10)


def api(browser, live_server, method, path, organization, **kwargs):
    headers = {"X-Organization": str(organization.pk), "X-CSRFToken": browser.cookies.get("csrftoken", ""),
               "Referer": f"{live_server.url}/"}
    return browser.request(method, f"{live_server.url}{path}", headers=headers, timeout=10, **kwargs)


def mint_key(browser, live_server, organization):
    return api(browser, live_server, "post", "/api/v1/api-keys/", organization,
               json={"name": "minted by the IdP", "scopes": ["read", "write"]})


def test_a_removed_member_invited_elsewhere_is_not_signed_in_by_the_first_provider(live_server, provider, tenant,
                                                                                    other_tenant):
    a, b = tenant.organization, other_tenant.organization
    configure(tenant, provider)
    _, first = sso_callback(live_server, provider, a)  # A's provider creates and links Alice
    assert first.status_code == 302
    alice = User.objects.get(email=ALICE)
    assert SSOIdentity.objects.filter(user=alice, organization=a).exists()
    Membership.objects.filter(user=alice, organization=a).delete()  # A removes her
    Membership.objects.create(user=alice, organization=b, role="admin")  # B's invitation, accepted
    alice.set_password(HER_PASSWORD)
    alice.save()

    browser, answer = sso_callback(live_server, provider, a)

    assert answer.status_code == 403 and refusal_code(answer) == "sso_account_exists"
    minted = mint_key(browser, live_server, b)
    assert minted.status_code in (401, 403), minted.text[:500]
    assert not ApiKey.objects.filter(organization=b, name="minted by the IdP").exists()
    assert not Membership.objects.filter(user=alice, organization=a).exists()  # not provisioned back into A
    assert browser.get(f"{live_server.url}/", allow_redirects=False, timeout=10).status_code == 302  # logged out


def test_a_session_of_a_provider_reaches_its_organization_only(live_server, provider, tenant, other_tenant):
    a, b = tenant.organization, other_tenant.organization
    configure(tenant, provider)
    sso_callback(live_server, provider, a)  # A's provider creates and links Alice
    alice = User.objects.get(email=ALICE)
    Membership.objects.filter(user=alice, organization=a).update(role="admin")
    Membership.objects.create(user=alice, organization=b, role="owner")  # and she owns B too
    alice.set_password(HER_PASSWORD)
    alice.save()

    browser, answer = sso_callback(live_server, provider, a)

    assert answer.status_code == 302 and answer.headers["Location"] == "/"
    assert api(browser, live_server, "get", "/api/v1/jobs/", a).status_code == 200
    refused = api(browser, live_server, "get", "/api/v1/jobs/", b)
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "sign_in_scope"
    minted = mint_key(browser, live_server, b)
    assert minted.status_code == 403 and minted.json()["error"]["code"] == "sign_in_scope"
    assert not ApiKey.objects.filter(organization=b, name="minted by the IdP").exists()
    assert mint_key(browser, live_server, a).status_code == 201  # in A she may
    # The pages: switching to B is refused, the dashboard stays A's, B is not offered.
    switched = browser.post(f"{live_server.url}/organization/switch/", data={
        "organization": str(b.pk), "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
        headers={"Referer": f"{live_server.url}/"}, timeout=10)
    assert "sign_in_scope" in switched.text
    dashboard = browser.get(f"{live_server.url}/", timeout=10)
    assert dashboard.status_code == 200 and a.name in dashboard.text and b.name not in dashboard.text
    # Her password (the other way in) reaches both.
    password_browser = requests.Session()
    password_browser.get(f"{live_server.url}/login/", timeout=10)
    logged_in = password_browser.post(f"{live_server.url}/login/", data={
        "username": ALICE, "password": HER_PASSWORD, "csrfmiddlewaretoken": password_browser.cookies["csrftoken"]},
        headers={"Referer": f"{live_server.url}/login/"}, allow_redirects=False, timeout=10)
    assert logged_in.status_code == 302
    assert api(password_browser, live_server, "get", "/api/v1/jobs/", b).status_code == 200


def test_a_session_of_one_providers_sso_does_not_connect_the_account_to_another_organization(
        live_server, provider, tenant, other_tenant):
    """Connecting an account to an organization's provider needs its owner logged in by
    password: a session that A's provider opened does not vouch for the person in B."""
    a, b = tenant.organization, other_tenant.organization
    configure(tenant, provider)
    configure(other_tenant, provider)  # B uses the same provider (e.g. one Google Workspace)
    browser, first = sso_callback(live_server, provider, a)
    assert first.status_code == 302  # Alice, new, joins A through A's provider

    for cookie in [c for c in browser.cookies if "localhost" not in c.domain]:  # logged out at the provider only
        browser.cookies.clear(cookie.domain, cookie.path, cookie.name)
    answer = sso_callback(live_server, provider, b, browser)[1]

    assert answer.status_code == 403 and refusal_code(answer) == "sso_account_exists"
    assert not Membership.objects.filter(user__email=ALICE, organization=b).exists()


def code_of(device):
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    totp.time = time.time()
    return f"{totp.token():06d}"


@pytest.mark.parametrize("idp_enforces_mfa", [False, True])
def test_a_person_with_two_factor_gives_the_code_after_the_provider(live_server, provider, tenant, other_tenant,
                                                                     idp_enforces_mfa):
    a, b = tenant.organization, other_tenant.organization
    configure(tenant, provider, idp_enforces_mfa=idp_enforces_mfa)
    _, first = sso_callback(live_server, provider, a)  # provisioned and linked
    alice = User.objects.get(email=ALICE)
    Membership.objects.create(user=alice, organization=b, role="developer")
    device = EncryptedTOTPDevice.objects.create(user=alice, name="phone", confirmed=True)

    browser, answer = sso_callback(live_server, provider, a)

    if idp_enforces_mfa:
        assert answer.status_code == 302 and answer.headers["Location"] == "/"
        assert browser.get(f"{live_server.url}/", allow_redirects=False, timeout=10).status_code == 200
        return
    assert answer.status_code == 302 and answer.headers["Location"] == "/login/code/"
    assert browser.get(f"{live_server.url}/", allow_redirects=False, timeout=10).status_code == 302  # not yet in
    assert api(browser, live_server, "get", "/api/v1/jobs/", a).status_code in (401, 403)
    page = browser.get(f"{live_server.url}/login/code/", timeout=10)
    assert page.status_code == 200
    done = browser.post(f"{live_server.url}/login/code/", data={"token": code_of(device),
                        "csrfmiddlewaretoken": browser.cookies["csrftoken"]},
                        headers={"Referer": f"{live_server.url}/login/code/"}, allow_redirects=False, timeout=10)
    assert done.status_code == 302 and done.headers["Location"] == "/"
    assert api(browser, live_server, "get", "/api/v1/jobs/", a).status_code == 200
    # The code completes A's single sign-on: the session still reaches A only.
    assert api(browser, live_server, "get", "/api/v1/jobs/", b).json()["error"]["code"] == "sign_in_scope"


@pytest.mark.django_db
def test_a_session_of_an_organizations_sso_never_opens_the_admin(tenant):
    """The admin reaches every organization: a staff member's session opened by one
    organization's provider is refused there; the same person's password session is not."""
    from django.test import Client

    from apps.accounts.signin_scope import SCOPE_KEY

    operator = User.objects.create_user(email="operator@example.com", password=HER_PASSWORD, is_staff=True,
                                        is_superuser=True)
    Membership.objects.create(user=operator, organization=tenant.organization, role="owner")
    client = Client()
    client.force_login(operator)
    session = client.session
    session[SCOPE_KEY] = {"password": False, "sso": [str(tenant.organization.pk)]}
    session.save()
    assert client.get("/admin/").status_code == 403
    assert client.get("/").status_code == 200  # its organization's pages it reaches

    password_session = Client()
    assert password_session.post("/admin/login/", {"username": operator.email, "password": HER_PASSWORD,
                                                   "next": "/admin/"}).status_code == 302
    assert password_session.get("/admin/").status_code == 200
