"""Authentication: API keys (Bearer) and sessions; every bad key is 401 invalid_api_key."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.services import suspend_organization
from tests.api.conftest import error_of, key_client


def test_no_credentials_is_401_not_authenticated(db):
    response = APIClient().get("/api/v1/jobs/")
    assert response.status_code == 401
    assert error_of(response)["code"] == "not_authenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize("header", [
    "Bearer ",
    "Bearer nonsense",
    "Bearer csk_live_short",
    "Bearer csk_live_" + "A" * 48,  # well-formed, unknown
    "bearer csk_live_" + "é" * 48,
])
def test_malformed_or_unknown_keys_are_401_invalid_api_key(db, header):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get("/api/v1/jobs/")
    assert response.status_code == 401
    assert error_of(response)["code"] == "invalid_api_key"


def test_right_lookup_wrong_secret_is_refused(tenant):
    forged = tenant.full_api_key[:-4] + ("AAAA" if not tenant.full_api_key.endswith("AAAA") else "BBBB")
    assert error_of(key_client(forged).get("/api/v1/jobs/"))["code"] == "invalid_api_key"


def test_revoked_key_is_refused(tenant, api):
    tenant.api_key.revoked_at = timezone.now()
    tenant.api_key.save()
    response = api.get("/api/v1/jobs/")
    assert response.status_code == 401
    assert error_of(response)["code"] == "invalid_api_key"


def test_expired_key_is_refused(tenant, make_key):
    _, client = make_key(tenant, expires_at=timezone.now() - timedelta(seconds=1))
    response = client.get("/api/v1/jobs/")
    assert response.status_code == 401
    assert error_of(response)["code"] == "invalid_api_key"


def test_key_of_a_suspended_organization_is_refused(tenant, api):
    suspend_organization(tenant.organization, reason="unpaid")
    response = api.get("/api/v1/jobs/")
    assert response.status_code == 401
    assert error_of(response)["code"] == "invalid_api_key"


def test_use_records_last_used_time(tenant, api):
    assert tenant.api_key.last_used_at is None
    assert api.get("/api/v1/jobs/").status_code == 200
    tenant.api_key.refresh_from_db()
    assert tenant.api_key.last_used_at is not None


def test_session_user_acts_in_their_organization(tenant, member_client):
    client = member_client(tenant, "viewer")
    response = client.get("/api/v1/projects/")
    assert response.status_code == 200
    assert [p["id"] for p in response.json()["results"]] == [str(tenant.project.pk)]


def test_session_user_of_a_suspended_organization_is_403(tenant, member_client):
    client = member_client(tenant, "owner")
    suspend_organization(tenant.organization)
    response = client.get("/api/v1/jobs/")
    assert response.status_code == 403
    assert error_of(response)["code"] == "organization_suspended"


def test_session_user_picks_an_organization_they_belong_to(tenant, other_tenant, member_client):
    client = member_client(tenant, "owner")
    mine = client.get("/api/v1/projects/", HTTP_X_ORGANIZATION=str(tenant.organization.pk))
    assert mine.status_code == 200
    for chosen in (str(other_tenant.organization.pk), "not-a-uuid"):
        response = client.get("/api/v1/projects/", HTTP_X_ORGANIZATION=chosen)
        assert response.status_code == 403
        assert error_of(response)["code"] == "permission_denied"


def test_session_writes_need_csrf(tenant):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(tenant.owner)
    response = client.post("/api/v1/projects/", {"name": "X"})
    assert response.status_code == 403
    assert error_of(response)["code"] == "permission_denied"


def test_key_requests_pass_the_browser_middleware_by(tenant, api):
    """A request made with a key never opens a session nor message storage (apps.api.middleware.BrowserOnly);
    one made with a session still has both."""
    by_key = api.get("/api/v1/jobs/")
    assert by_key.status_code == 200
    assert not hasattr(by_key.wsgi_request, "session") and not hasattr(by_key.wsgi_request, "_messages")
    assert "Cookie" not in by_key.get("Vary", "") and not by_key.cookies

    refused = APIClient(HTTP_AUTHORIZATION="bearer csk_live_nope").get("/api/v1/jobs/")  # any case, as DRF reads it
    assert refused.status_code == 401 and not hasattr(refused.wsgi_request, "session")

    by_session = APIClient()
    by_session.force_login(tenant.owner)
    response = by_session.get("/api/v1/projects/")
    assert response.status_code == 200
    assert hasattr(response.wsgi_request, "session") and hasattr(response.wsgi_request, "_messages")


@pytest.mark.parametrize("header", ["Bearer garbage", "Bearer", "bearer csk_live_unknown"])
def test_a_bad_key_beside_a_signed_in_session_is_refused_not_let_in_by_the_session(client, tenant, header):
    """The browser's middleware passes Bearer requests by (apps.api.middleware.BrowserOnly):
    the key alone decides, so a stolen session cookie sent with any Bearer header gets nothing."""
    client.force_login(tenant.owner)
    response = client.get("/api/v1/jobs/", HTTP_AUTHORIZATION=header)
    assert response.status_code == 401 and response.json()["error"]["code"] == "invalid_api_key"
