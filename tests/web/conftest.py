"""Web page fixtures: logged-in Django test clients per role, and fresh page counters."""

import itertools

import pytest
from django.test import Client

from apps.accounts.models import Membership, User

_n = itertools.count(1)


@pytest.fixture(autouse=True)
def _private_web_counters(settings):
    """Login, test-run and key-creation counters in this test's own memory, not the shared Redis
    (every test client calls from 127.0.0.1)."""
    n = next(_n)
    settings.CACHES = {**settings.CACHES, **{alias: {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": f"{alias}-test-{n}"}
        for alias in ("web", "api")}}


@pytest.fixture
def web_client(db):
    """A browser session of a member of ``tenant`` with ``role`` (the owner for "owner")."""

    def make(tenant, role="owner", password=None):
        if role == Membership.Role.OWNER:
            user = tenant.owner
        else:
            user = User.objects.create_user(email=f"{role}{next(_n)}@example.com", password=password)
            Membership.objects.create(user=user, organization=tenant.organization, role=role)
        client = Client()
        client.force_login(user)
        client.user = user
        return client

    return make


@pytest.fixture
def owner(tenant, web_client):
    return web_client(tenant)


def job_form(tenant, **overrides):
    """A valid job form as the browser posts it."""
    data = {
        "project": str(tenant.project.pk), "name": "Nightly report", "description": "", "tags": "billing, nightly",
        "schedule_mode": "cron", "cron_expression": "0 3 * * *", "every_n": "", "every_unit": "minutes",
        "once_at": "", "timezone": "Europe/Berlin", "start_at": "", "end_at": "", "jitter_seconds": "0",
        "method": "POST", "url": "https://example.com/hook", "header_name": ["X-Team", ""],
        "header_value": ["data", ""], "body": '{"job": "{{ job.id }}"}', "body_format": "json",
        "auth_type": "bearer", "auth_username": "", "auth_password": "", "auth_token": "s3cr3t",
        "timeout_seconds": "30", "max_attempts": "3", "retry_initial_delay_seconds": "10",
        "retry_max_delay_seconds": "600", "retry_multiplier": "2", "success_status_codes": "200-299",
        "success_body_contains": "", "success_body_regex": "", "misfire_policy": "run_once",
        "misfire_grace_seconds": "3600", "overlap_policy": "allow",
    }
    data.update(overrides)
    return data
