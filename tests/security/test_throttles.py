"""Throttles and disclosure with two organizations: /admin/login/ under /login/'s limits,
failed API-key authentications per client address, messages sent on request (password
reset, channel tests) per address and per organization — each a 429 with Retry-After — and
/readyz telling anonymous callers its status only."""

import pytest
from django.core import mail
from django.test import Client
from rest_framework.test import APIClient

from apps.accounts.models import User
from tests.security.test_login import PASSWORD, clock, login  # noqa: F401 - the private-time fixture

pytestmark = pytest.mark.django_db


def admin_login(ip, email, password):
    return Client(REMOTE_ADDR=ip).post("/admin/login/", {"username": email, "password": password,
                                                         "next": "/admin/"})


@pytest.fixture
def operator(db):
    return User.objects.create_user(email="operator@example.com", password=PASSWORD, is_staff=True)


def test_the_admin_login_has_the_limits_of_the_login_page(operator, clock, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT = 3
    for _ in range(3):
        assert admin_login("203.0.113.7", operator.email, "guess").status_code == 200  # the form again
    refused = admin_login("203.0.113.7", operator.email, PASSWORD)
    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 900
    assert "Too many failed log-in attempts" in refused.content.decode()
    # The same counters as /login/: the page refuses the account from that address too ...
    assert login("203.0.113.7", operator.email, PASSWORD).status_code == 429
    # ... and from elsewhere the operator still logs in (no lockout from afar).
    assert admin_login("198.51.100.7", operator.email, PASSWORD).status_code == 302


def test_the_admin_login_is_limited_per_address(operator, clock, settings):
    settings.LOGIN_FAILURES_PER_IP = 2
    for n in range(2):
        admin_login("203.0.113.8", f"nobody{n}@example.com", "guess")
    refused = admin_login("203.0.113.8", operator.email, PASSWORD)
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0


def test_the_login_page_says_when_to_retry(tenant, clock, settings):
    settings.LOGIN_FAILURES_PER_IP = 1
    login("203.0.113.9", "nobody@example.com", "guess")
    refused = login("203.0.113.9", tenant.owner.email, "x")
    assert refused.status_code == 429 and int(refused["Retry-After"]) > 0


def key_client(ip, key):
    client = APIClient(REMOTE_ADDR=ip)
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    return client


def test_failed_api_key_authentications_are_limited_per_client_address(tenant, other_tenant, settings):
    settings.API_KEY_FAILURES_PER_IP = 3
    wrong = tenant.full_api_key[:-4] + ("aaaa" if not tenant.full_api_key.endswith("aaaa") else "bbbb")
    for token in ("csk_live_nonsense", wrong, "not-even-a-key"):
        answer = key_client("203.0.113.10", token).get("/api/v1/jobs/")
        assert answer.status_code == 401 and answer.json()["error"]["code"] == "invalid_api_key"

    refused = key_client("203.0.113.10", wrong).get("/api/v1/jobs/")

    assert refused.status_code == 429 and refused.json()["error"]["code"] == "throttled"
    assert 0 < int(refused["Retry-After"]) <= settings.API_KEY_FAILURE_WINDOW
    # Another address is not refused; valid keys of both organizations from elsewhere work.
    assert key_client("203.0.113.11", wrong).get("/api/v1/jobs/").status_code == 401
    assert key_client("203.0.113.11", tenant.full_api_key).get("/api/v1/jobs/").status_code == 200
    assert key_client("203.0.113.12", other_tenant.full_api_key).get("/api/v1/jobs/").status_code == 200


def reset(ip, email):
    return Client(REMOTE_ADDR=ip).post("/password-reset/", {"email": email})


@pytest.mark.parametrize("known", [True, False])
def test_password_resets_are_limited_per_address_whether_or_not_it_has_an_account(tenant, clock, settings, known):
    settings.MAIL_PER_ADDRESS_PER_HOUR = 2
    tenant.owner.set_password(PASSWORD)  # Django mails resets to accounts with a password only
    tenant.owner.save()
    email = tenant.owner.email if known else "nobody-here@example.com"
    assert [reset(f"203.0.113.{20 + n}", email).status_code for n in range(2)] == [302, 302]

    refused = reset("203.0.113.30", email)

    assert refused.status_code == 429 and 0 < int(refused["Retry-After"]) <= 3600
    assert len(mail.outbox) == (2 if known else 0)
    assert reset("203.0.113.30", "someone-else@example.com").status_code == 302  # another address


def test_password_resets_are_limited_per_client_address(clock, settings):
    settings.MAIL_PER_CLIENT_PER_HOUR = 3
    for n in range(3):
        assert reset("203.0.113.40", f"person{n}@example.com").status_code == 302
    assert reset("203.0.113.40", "person9@example.com").status_code == 429


def email_channel(api, tenant, n):
    answer = api.post("/api/v1/channels/", {"project": str(tenant.project.pk), "kind": "email", "name": f"mail {n}",
                                            "config": {"to": [f"ops{n}@example.com"]}}, format="json")
    assert answer.status_code == 201, answer.content
    return answer.json()["id"]


def test_channel_tests_are_limited_per_channel_and_per_organization(tenant, other_tenant, api, other_api, clock,
                                                                   settings):
    settings.MAIL_PER_ADDRESS_PER_HOUR = 2
    settings.MAIL_PER_ORGANIZATION_PER_HOUR = 3
    first, second = email_channel(api, tenant, 1), email_channel(api, tenant, 2)
    assert [api.post(f"/api/v1/channels/{first}/test/").status_code for _ in range(2)] == [200, 200]

    per_channel = api.post(f"/api/v1/channels/{first}/test/")
    assert per_channel.status_code == 429 and int(per_channel["Retry-After"]) > 0
    assert per_channel.json()["error"]["code"] == "throttled"
    assert api.post(f"/api/v1/channels/{second}/test/").status_code == 200  # the organization's third
    per_organization = api.post(f"/api/v1/channels/{second}/test/")
    assert per_organization.status_code == 429
    page = Client()
    page.force_login(tenant.owner)
    refused_page = page.post(f"/notifications/channels/{second}/test/")
    assert refused_page.status_code == 429 and int(refused_page["Retry-After"]) > 0
    assert len(mail.outbox) == 3
    # The other organization is not limited by this one's tests.
    theirs = email_channel(other_api, other_tenant, 3)
    assert other_api.post(f"/api/v1/channels/{theirs}/test/").status_code == 200


DETAILS = {"checks", "processes"}


def test_readyz_tells_anonymous_callers_its_status_only(client, settings):
    settings.METRICS_TOKEN = "readyz-token-7f3a"
    settings.METRICS_ALLOWED_IPS = ["10.9.0.0/16"]

    anonymous = client.get("/readyz")
    wrong = client.get("/readyz", HTTP_AUTHORIZATION="Bearer not-the-token")
    with_token = client.get("/readyz", HTTP_AUTHORIZATION="Bearer readyz-token-7f3a")
    from_network = Client(REMOTE_ADDR="10.9.3.4").get("/readyz")

    assert anonymous.status_code == 200 and anonymous.json() == {"status": "ok"}
    assert wrong.json() == {"status": "ok"}
    assert DETAILS <= set(with_token.json()) and with_token.json()["checks"]["database"] == "ok"
    assert DETAILS <= set(from_network.json())


def test_readyz_keeps_its_details_from_anonymous_callers_when_not_ready(client, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = []
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:9/0"

    anonymous = client.get("/readyz")

    assert anonymous.status_code == 503 and anonymous.json() == {"status": "unavailable"}
