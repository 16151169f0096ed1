"""Two-factor authentication: enable with a code, log in with password then code, turn
off, and OPERATOR_2FA for staff in the admin."""

import time

import pytest
from django.test import Client
from django_otp.oath import TOTP

from apps.accounts.models import EncryptedTOTPDevice

pytestmark = pytest.mark.django_db
PASSWORD = "correct horse battery"


def code(device, offset=0):
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    totp.time = time.time() + offset
    return f"{totp.token():06d}"


@pytest.fixture
def owner(tenant):
    tenant.owner.set_password(PASSWORD)
    tenant.owner.save()
    return tenant.owner


def enable(client, user):
    client.force_login(user)
    assert client.post("/account/two-factor/", {"action": "start"}).status_code == 200
    device = EncryptedTOTPDevice.objects.get(user=user, confirmed=False)
    assert client.post("/account/two-factor/", {"action": "confirm", "token": "000000"}).status_code == 400
    device.refresh_from_db()
    device.throttling_failure_count, device.throttling_failure_timestamp = 0, None
    device.save()
    response = client.post("/account/two-factor/", {"action": "confirm", "token": code(device)})
    assert response.status_code == 302
    device.refresh_from_db()
    assert device.confirmed
    return device


def test_enable_then_log_in_with_password_and_code(owner):
    device = enable(Client(), owner)
    client = Client()
    response = client.post("/login/", {"username": owner.email, "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/login/code/"
    assert client.get("/").status_code == 302  # the password alone did not log in
    assert client.post("/login/code/", {"token": "123456" if code(device, 30) != "123456" else "654321"}
                       ).status_code == 400
    device.refresh_from_db()
    device.throttling_failure_count, device.throttling_failure_timestamp = 0, None
    device.save()
    response = client.post("/login/code/", {"token": code(device, 30)})  # the next step: not yet used
    assert response.status_code == 302
    assert client.get("/").status_code == 200


def test_without_a_pending_password_the_code_page_sends_to_login():
    assert Client().get("/login/code/")["Location"] == "/login/"


def test_users_without_two_factor_log_in_as_before(owner):
    response = Client().post("/login/", {"username": owner.email, "password": PASSWORD})
    assert response.status_code == 302 and response["Location"] == "/"


def test_turning_off_needs_a_code(owner):
    client = Client()
    device = enable(client, owner)
    assert client.post("/account/two-factor/", {"action": "disable", "token": "x"}).status_code == 400
    assert EncryptedTOTPDevice.objects.filter(user=owner).exists()
    device.refresh_from_db()
    device.throttling_failure_count, device.throttling_failure_timestamp = 0, None  # no waiting in tests
    device.save()
    client.post("/account/two-factor/", {"action": "disable", "token": code(device, 30)})
    assert not EncryptedTOTPDevice.objects.filter(user=owner).exists()


def test_operator_2fa_guards_the_admin(owner, settings):
    owner.is_staff = owner.is_superuser = True
    owner.save()
    settings.OPERATOR_2FA = False
    client = Client()
    client.force_login(owner)
    assert client.get("/admin/").status_code == 200
    settings.OPERATOR_2FA = True
    response = client.get("/admin/")
    assert response.status_code == 302 and response["Location"].startswith("/account/two-factor/")
    device = enable(client, owner)  # enabling verifies this session
    assert client.get("/admin/").status_code == 200
    other = Client()
    other.force_login(owner)  # a fresh session with the password only
    response = other.get("/admin/jobs/job/")
    assert response["Location"].startswith("/login/code/?next=/admin/jobs/job/")
    response = other.post(response["Location"], {"token": code(device, 30)})
    assert response.status_code == 302 and response["Location"] == "/admin/jobs/job/"
    assert other.get("/admin/").status_code == 200
