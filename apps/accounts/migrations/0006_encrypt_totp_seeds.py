"""Move every django-otp TOTPDevice (seed in clear) into EncryptedTOTPDevice (seed encrypted).

The encrypted field encrypts on save, so copying the row is the encryption; the plaintext
row is then deleted. Users keep their authenticator app: the seed itself does not change.
Sessions verified with an old device are asked for a code again once (the device id changed).
"""

from django.db import migrations

COPIED_FIELDS = ["user_id", "name", "confirmed", "key", "step", "t0", "digits", "tolerance", "drift", "last_t",
                 "throttling_failure_timestamp", "throttling_failure_count", "last_used_at"]


def move_devices(source, target):
    # A few rows per user with two-factor on: no batching needed.
    for device in source.objects.order_by("pk"):
        copy = target.objects.create(**{name: getattr(device, name) for name in COPIED_FIELDS})
        # created_at is auto_now_add, so create() stamped it now: put the real date back.
        target.objects.filter(pk=copy.pk).update(created_at=device.created_at)
    source.objects.all().delete()


def encrypt_seeds(apps, schema_editor):
    move_devices(apps.get_model("otp_totp", "TOTPDevice"), apps.get_model("accounts", "EncryptedTOTPDevice"))


def decrypt_seeds(apps, schema_editor):
    move_devices(apps.get_model("accounts", "EncryptedTOTPDevice"), apps.get_model("otp_totp", "TOTPDevice"))


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0005_encrypted_totp_device"),
        ("otp_totp", "0003_add_timestamps"),
    ]

    operations = [migrations.RunPython(encrypt_seeds, decrypt_seeds)]
