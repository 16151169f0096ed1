"""Standard Webhooks signatures, checked by the standardwebhooks package (an independent
implementation) and by a verifier written here with the standard library alone."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cronsvc.delivery.signing import generate_secret, sign, signature_headers, verify


def stdlib_verify(secret: str, headers: dict[str, str], body: bytes) -> bool:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    signatures = [s.split(",", 1) for s in headers["webhook-signature"].split(" ")]
    return any(version == "v1" and hmac.compare_digest(sig, expected) for version, sig in signatures)


def test_generated_secrets_are_whsec_and_32_random_bytes():
    first, second = generate_secret(), generate_secret()
    assert first.startswith("whsec_") and first != second
    assert len(base64.b64decode(first.removeprefix("whsec_"))) == 32


def test_the_standardwebhooks_package_verifies_our_signature():
    secret, body = generate_secret(), b'{"job": "nightly"}'
    headers = signature_headers([secret], "msg_2Lrf", int(time.time()), body)
    assert Webhook(secret).verify(body, headers) == {"job": "nightly"}
    assert stdlib_verify(secret, headers, body)


def test_two_secrets_during_rotation_both_verify():
    old, new, body = generate_secret(), generate_secret(), b"payload"
    headers = signature_headers([old, new], "ex-1", int(time.time()), body)
    assert len(headers["webhook-signature"].split(" ")) == 2
    for secret in (old, new):
        Webhook(secret).verify(body, headers, json_parse=False)
        assert stdlib_verify(secret, headers, body)
    with pytest.raises(WebhookVerificationError):
        Webhook(generate_secret()).verify(body, headers, json_parse=False)


def test_a_tampered_body_or_id_fails():
    secret, body = generate_secret(), b"payload"
    headers = signature_headers([secret], "ex-1", int(time.time()), body)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(b"payload!", headers, json_parse=False)
    assert not stdlib_verify(secret, {**headers, "webhook-id": "ex-2"}, body)


def test_same_value_as_the_reference_implementation():
    from datetime import datetime, timezone

    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    expected = Webhook(secret).sign("msg_p5jXN8AQM9LWM0D4loKWxJek", datetime.fromtimestamp(
        1614265330, tz=timezone.utc), '{"test": 2432232314}')
    assert sign([secret], "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}') == expected
    # The published Svix test vector.
    assert expected == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


@settings(max_examples=50)
@given(st.binary(max_size=2000), st.integers(0, 2**40))
def test_any_body_roundtrips_through_our_verify(body, timestamp):
    secret = generate_secret()
    headers = signature_headers([secret], "ex", timestamp, body)
    assert verify(secret, headers, body, now=timestamp)
    assert stdlib_verify(secret, headers, body)


def test_our_verify_rejects_stale_wrong_and_malformed():
    secret, body = generate_secret(), b"x"
    headers = signature_headers([secret], "ex", 1000, body)
    assert verify(secret, headers, body, now=1000 + 300)
    assert not verify(secret, headers, body, now=1000 + 301)
    assert not verify(generate_secret(), headers, body, now=1000)
    assert not verify(secret, {**headers, "webhook-signature": "v1,not-base64!"}, body, now=1000)
    assert not verify(secret, {**headers, "webhook-signature": "v2," + headers["webhook-signature"][3:]},
                      body, now=1000)
    assert not verify(secret, {**headers, "webhook-timestamp": "soon"}, body, now=1000)
    assert not verify(secret, {**headers, "webhook-timestamp": "\u00b2"}, body, now=1000)


def test_signing_needs_a_valid_secret():
    with pytest.raises(ValueError):
        sign([], "ex", 1, b"")
    with pytest.raises(ValueError):
        sign(["whsec_!!!"], "ex", 1, b"")
