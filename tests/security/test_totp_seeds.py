"""TOTP seeds are encrypted at rest: the column holds a token, not the seed; codes still
verify after a save, after a key rotation with the old key removed, and after the data
migration that encrypted the seeds django-otp had stored in clear."""

import importlib
import io
import time
from base64 import b32encode
from binascii import unhexlify
from datetime import UTC, datetime

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django_otp import match_token
from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice as PlaintextTOTPDevice

from apps.accounts.models import EncryptedTOTPDevice
from apps.accounts.rotation import encrypted_fields, pending
from cronsvc.crypto import new_key

pytestmark = pytest.mark.django_db
KEY_A, KEY_B = new_key(), new_key()
SEED = "3132333435363738393031323334353637383930"  # RFC 6238's test seed, hex-encoded
migration = importlib.import_module("apps.accounts.migrations.0006_encrypt_totp_seeds")


@pytest.fixture
def key_a(settings):
    settings.ENCRYPTION_KEYS = [KEY_A]


@pytest.fixture
def user():
    return get_user_model().objects.create_user(email="seed-owner@example.com", password="not-the-point")


def code(device):
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    totp.time = time.time()
    return f"{totp.token():0{device.digits}d}"


def stored_key(device):
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT key FROM {EncryptedTOTPDevice._meta.db_table} WHERE id = %s", [device.pk])
        return cursor.fetchone()[0]


def test_seeds_are_rotated_with_the_other_secrets():
    found = dict((model._meta.label, names) for model, names in encrypted_fields())
    assert found["accounts.EncryptedTOTPDevice"] == ["key"]


def test_the_column_holds_a_token_not_the_seed(key_a, user):
    device = EncryptedTOTPDevice.objects.create(user=user, name="phone", key=SEED)
    raw = stored_key(device)
    assert SEED not in raw and raw.startswith("gAAAAA")  # a Fernet token
    device = EncryptedTOTPDevice.objects.get(pk=device.pk)
    assert device.key == SEED
    assert device.verify_token(code(device))


def test_a_generated_seed_is_encrypted_too(key_a, user):
    device = EncryptedTOTPDevice.objects.create(user=user, name="phone")  # django-otp's random seed
    assert len(device.key) == 40 and device.key not in stored_key(device)
    assert EncryptedTOTPDevice.objects.get(pk=device.pk).key == device.key


def test_codes_verify_after_rotation_with_the_old_key_removed(key_a, settings):
    users = [get_user_model().objects.create_user(email=f"u{i}@example.com", password="x") for i in range(3)]
    devices = [EncryptedTOTPDevice.objects.create(user=u, name="phone") for u in users]
    tokens_before = [stored_key(d) for d in devices]

    settings.ENCRYPTION_KEYS = [KEY_B, KEY_A]
    assert pending()["accounts.EncryptedTOTPDevice"] == 3
    out = io.StringIO()
    call_command("rotate_encryption_keys", "--batch-size", "2", stdout=out)
    assert "accounts.EncryptedTOTPDevice" in out.getvalue()  # batched like every other model
    assert pending() == {}
    assert all(stored_key(d) != before for d, before in zip(devices, tokens_before, strict=True))

    settings.ENCRYPTION_KEYS = [KEY_B]  # key A removed
    for user, device in zip(users, devices, strict=True):
        assert match_token(user, code(device)) == device


def test_rotation_of_seeds_resumes_after_a_cursor(key_a, settings):
    devices = [EncryptedTOTPDevice.objects.create(
        user=get_user_model().objects.create_user(email=f"r{i}@example.com", password="x"), name="phone")
        for i in range(3)]
    settings.ENCRYPTION_KEYS = [KEY_B, KEY_A]
    call_command("rotate_encryption_keys", "--resume", f"accounts.EncryptedTOTPDevice:{devices[0].pk}",
                 stdout=io.StringIO())
    assert pending().get("accounts.EncryptedTOTPDevice") == 1  # the device before the cursor


def test_the_migration_encrypts_a_seed_stored_in_clear(key_a, user):
    created = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)
    plain = PlaintextTOTPDevice.objects.create(user=user, name="old phone", key=SEED, confirmed=True, drift=1)
    PlaintextTOTPDevice.objects.filter(pk=plain.pk).update(created_at=created)

    migration.encrypt_seeds(apps, schema_editor=None)

    assert not PlaintextTOTPDevice.objects.exists()  # nothing left in clear
    device = EncryptedTOTPDevice.objects.get(user=user)
    assert SEED not in stored_key(device)
    assert (device.key, device.name, device.confirmed, device.drift, device.created_at) == (
        SEED, "old phone", True, 1, created)
    assert match_token(user, code(device)) == device  # the user's app goes on working


def test_the_migration_reversed_gives_django_otp_its_devices_back(key_a, user):
    EncryptedTOTPDevice.objects.create(user=user, name="phone", key=SEED)
    migration.decrypt_seeds(apps, schema_editor=None)
    assert not EncryptedTOTPDevice.objects.exists()
    assert PlaintextTOTPDevice.objects.get(user=user).key == SEED


def test_the_admin_never_shows_the_seed(key_a, user, settings):
    settings.OPERATOR_2FA = False
    device = EncryptedTOTPDevice.objects.create(user=user, name="phone", key=SEED)
    operator = get_user_model().objects.create_superuser(email="operator@example.com", password="x")
    client = Client()
    client.force_login(operator)
    base32_seed = b32encode(unhexlify(SEED)).decode()
    for url in ("/admin/accounts/encryptedtotpdevice/", f"/admin/accounts/encryptedtotpdevice/{device.pk}/change/"):
        response = client.get(url)
        assert response.status_code == 200
        assert SEED not in response.content.decode() and base32_seed not in response.content.decode()
    assert client.get("/admin/otp_totp/totpdevice/").status_code == 404  # django-otp's plaintext admin is gone
