"""Single sign-on end to end against a real OpenID Connect provider: django-oauth-toolkit
in its own process (tests/support/oidc_provider/), cronsvc on a live server, a requests
session as the browser. Sign-in with provisioning, and the refusals: a token for another
audience, an expired token, a person of another e-mail domain, a forged state."""

import re

import pytest
import requests

from apps.accounts.models import AuditEvent, Membership, OrganizationSSO, User
from tests.support.idp import sign_in_at_provider, start_provider

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "provider-password-1"
APPLICATIONS = {"cronsvc": "cronsvc-client", "wrong-audience": "cronsvc-wrong-aud", "expired": "cronsvc-expired"}


@pytest.fixture(scope="module")
def provider(live_server, tmp_path_factory):
    callback = f"{live_server.url}/sso/callback/"
    running = start_provider(
        tmp_path_factory.mktemp("idp"),
        users=[{"email": "alice@example.com", "password": PASSWORD, "first_name": "Alice"},
               {"email": "mallory@other.test", "password": PASSWORD}],
        applications=[{"name": name, "client_id": client_id, "client_secret": f"{client_id}-secret",
                       "redirect_uri": callback} for name, client_id in APPLICATIONS.items()])
    yield running
    running.stop()


@pytest.fixture(autouse=True)
def _provider_reachable(settings, live_server):
    """The provider listens on loopback, which the outbound guard refuses unless allowed; the
    redirect URI is SITE_URL's."""
    settings.SSO_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.SITE_URL = live_server.url


def configure(tenant, provider, application="cronsvc", **fields):
    client_id = APPLICATIONS[application]
    return OrganizationSSO.objects.create(organization=tenant.organization, issuer=provider.issuer,
                                          client_id=client_id, client_secret=f"{client_id}-secret",
                                          allowed_domains="example.com", default_role="developer", **fields)


def start_sso(live_server, browser, identifier):
    page = browser.get(f"{live_server.url}/sso/", timeout=10)
    assert page.status_code == 200
    return browser.post(f"{live_server.url}/sso/", data={"identifier": identifier,
                        "csrfmiddlewaretoken": browser.cookies["csrftoken"]}, allow_redirects=False, timeout=10)


def sign_in(live_server, provider, tenant, email="alice@example.com"):
    browser = requests.Session()
    to_provider = start_sso(live_server, browser, tenant.organization.slug)
    assert to_provider.status_code == 302 and to_provider.headers["Location"].startswith(provider.issuer)
    back = sign_in_at_provider(browser, to_provider, email, PASSWORD)
    assert back.status_code == 302 and back.headers["Location"].startswith(f"{live_server.url}/sso/callback/")
    return browser, back.headers["Location"]


def refusal_code(response):
    return re.search(r'id="sso-error-code">([a-z_]+)<', response.text).group(1)


def test_a_person_of_the_domain_signs_in_and_joins_with_the_default_role(live_server, provider, tenant):
    configure(tenant, provider)
    browser, callback = sign_in(live_server, provider, tenant)

    landed = browser.get(callback, allow_redirects=False, timeout=10)

    assert landed.status_code == 302 and landed.headers["Location"] == "/"
    dashboard = browser.get(f"{live_server.url}/", timeout=10)
    assert dashboard.status_code == 200 and tenant.organization.name in dashboard.text
    user = User.objects.get(email="alice@example.com")
    assert user.first_name == "Alice" and not user.has_usable_password()
    assert Membership.objects.get(user=user, organization=tenant.organization).role == "developer"
    actions = set(AuditEvent.objects.filter(organization=tenant.organization).values_list("action", flat=True))
    assert {"sso.member_provisioned", "sso.login"} <= actions
    replayed = browser.get(callback, allow_redirects=False, timeout=10)  # a state answers once
    assert replayed.status_code == 400 and refusal_code(replayed) == "sso_state_mismatch"


def test_an_existing_member_signs_in_again_without_a_second_membership(live_server, provider, tenant):
    configure(tenant, provider)
    user = User.objects.create_user(email="alice@example.com", password="her-own-password")
    Membership.objects.create(user=user, organization=tenant.organization, role="admin")
    browser, callback = sign_in(live_server, provider, tenant)

    assert browser.get(callback, allow_redirects=False, timeout=10).headers["Location"] == "/"
    assert list(Membership.objects.filter(user=user).values_list("role", flat=True)) == ["admin"]


@pytest.mark.parametrize("application, email, status, code", [
    ("wrong-audience", "alice@example.com", 400, "sso_wrong_audience"),  # an ID token for another client id
    ("expired", "alice@example.com", 400, "sso_token_expired"),
    ("cronsvc", "mallory@other.test", 403, "sso_domain_not_allowed"),
])
def test_a_refused_sign_in_logs_no_one_in_and_is_audited(live_server, provider, tenant, application, email, status,
                                                          code):
    configure(tenant, provider, application=application)
    browser, callback = sign_in(live_server, provider, tenant, email=email)

    refused = browser.get(callback, allow_redirects=False, timeout=10)

    assert refused.status_code == status and refusal_code(refused) == code
    assert not User.objects.filter(email=email).exists()
    event = AuditEvent.objects.get(organization=tenant.organization, action="sso.refused")
    assert event.data["code"] == code
    assert browser.get(f"{live_server.url}/", allow_redirects=False, timeout=10).status_code == 302  # not logged in


def test_an_answer_with_a_forged_state_is_refused(live_server, provider, tenant):
    configure(tenant, provider)
    browser, callback = sign_in(live_server, provider, tenant)

    refused = browser.get(re.sub(r"state=[^&]+", "state=forged", callback), allow_redirects=False, timeout=10)

    assert refused.status_code == 400 and refusal_code(refused) == "sso_state_mismatch"
    assert not User.objects.filter(email="alice@example.com").exists()
