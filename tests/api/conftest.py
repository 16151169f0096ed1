"""API test fixtures: clients for each role (sessions) and for API keys, and job bodies."""

import itertools
import uuid

import pytest
from rest_framework.test import APIClient

from apps.accounts.models import Membership, User
from apps.accounts.apikeys import create_api_key

_n = itertools.count(1)


def key_client(api_key_text):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {api_key_text}")
    return client


@pytest.fixture
def make_key(db):
    def make(tenant, scopes=("read", "write"), **kwargs):
        key, full = create_api_key(tenant.organization, f"key {next(_n)}", scopes=scopes, **kwargs)
        return key, key_client(full)

    return make


@pytest.fixture
def member_client(db):
    """A logged-in member of the tenant with ``role`` (sessions, as the web pages use)."""

    def make(tenant, role):
        if role == Membership.Role.OWNER:
            user = tenant.owner
        else:
            user = User.objects.create_user(email=f"{role}{next(_n)}@example.com")
            Membership.objects.create(user=user, organization=tenant.organization, role=role)
        client = APIClient()
        client.force_login(user)
        client.user = user
        return client

    return make


def job_body(tenant, **overrides):
    body = {
        "project": str(tenant.project.pk),
        "name": "Nightly report",
        "schedule": {"type": "cron", "expression": "0 3 * * *", "timezone": "Europe/Berlin"},
        "request": {"url": "https://example.com/hook"},
    }
    body.update(overrides)
    return body


def error_of(response):
    assert "error" in response.json(), response.json()
    return response.json()["error"]


@pytest.fixture(autouse=True)
def _private_ip_quota(settings, monkeypatch):
    """Every test client calls from 127.0.0.1 and per-IP key-creation counts live in Redis for
    an hour, shared with other suites (the browser tests create keys too): count each test's
    creations in a window of its own, far from the real clock, and lift the quota unless a
    test sets its own."""
    from apps.api import throttling

    private_hour = 4_000_000_000 + (uuid.uuid4().int % 10**6) * 3600
    monkeypatch.setattr(throttling.KeyCreationIPThrottle, "timer", lambda self: float(private_hour))
    settings.API_KEY_CREATE_PER_IP_PER_HOUR = 1_000_000


@pytest.fixture(autouse=True)
def _public_targets_only(settings):
    """The production default whatever the environment: tests that allow private targets say so."""
    settings.OUTBOUND_ALLOW_PRIVATE = False
