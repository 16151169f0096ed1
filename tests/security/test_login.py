"""Log-in throttling: per client address and per account+address, time-bounded, so an
attacker cannot lock the owner out (for ever, or from elsewhere)."""

import itertools

import pytest
from django.test import Client

from apps.api import ratelimit

pytestmark = pytest.mark.django_db
PASSWORD = "correct horse battery"
_windows = itertools.count(1)


@pytest.fixture
def clock(monkeypatch, settings):
    """A private stretch of time (the counters live in the shared Redis) that tests move."""
    settings.LOGIN_RATE_WINDOW = 900
    now = {"t": 5_000_000_000.0 + next(_windows) * 100_000 + (id(monkeypatch) % 997) * 1_000_000}
    monkeypatch.setattr(ratelimit, "clock", lambda: now["t"])
    return now


@pytest.fixture
def owner(tenant):
    tenant.owner.set_password(PASSWORD)
    tenant.owner.save()
    return tenant.owner


def login(ip, email, password, **extra):
    return Client(REMOTE_ADDR=ip, **extra).post("/login/", {"username": email, "password": password})


def test_an_attacker_cannot_lock_the_owner_out_from_elsewhere(owner, clock, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT = 3
    for _ in range(3):
        assert login("203.0.113.5", owner.email, "guess").status_code == 400
    assert login("203.0.113.5", owner.email, PASSWORD).status_code == 429  # the attacker's address: locked
    assert login("198.51.100.7", owner.email, PASSWORD).status_code == 302  # the owner's: not


def test_the_lockout_ends_with_its_window(owner, clock, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT = 2
    for _ in range(2):
        login("203.0.113.6", owner.email, "guess")
    response = login("203.0.113.6", owner.email, PASSWORD)
    assert response.status_code == 429 and "Try again in" in response.content.decode()
    clock["t"] += 901
    assert login("203.0.113.6", owner.email, PASSWORD).status_code == 302


def test_many_addresses_are_bounded_per_account(owner, clock, settings):
    settings.LOGIN_FAILURES_PER_ACCOUNT_ANY_IP = 4
    for n in range(4):
        login(f"203.0.113.{20 + n}", owner.email, "guess")
    assert login("203.0.113.99", owner.email, PASSWORD).status_code == 429


def test_forwarded_address_counts_only_behind_trusted_proxies(owner, clock, settings):
    settings.LOGIN_FAILURES_PER_IP = 2
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 0}
    # Untrusted: a forged X-Forwarded-For does not give the attacker a fresh address.
    for n in range(2):
        login("203.0.113.50", f"nobody{n}@example.com", "x", HTTP_X_FORWARDED_FOR=f"10.9.9.{n}")
    assert login("203.0.113.50", owner.email, PASSWORD, HTTP_X_FORWARDED_FOR="10.9.9.77").status_code == 429
    # Behind one trusted proxy the forwarded address is the client's.
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}
    for n in range(2):
        login("10.0.0.1", f"nobody{n}@example.com", "x", HTTP_X_FORWARDED_FOR="198.51.100.60")
    assert login("10.0.0.1", owner.email, PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.60").status_code == 429
    assert login("10.0.0.1", owner.email, PASSWORD, HTTP_X_FORWARDED_FOR="198.51.100.61").status_code == 302


def test_weak_passwords_are_refused_at_signup(client):
    response = client.post("/signup/", {"email": "new@example.com", "organization": "New",
                                        "password1": "password", "password2": "password"})
    assert response.status_code == 400 and "too common" in response.content.decode()
