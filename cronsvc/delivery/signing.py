"""Standard Webhooks signatures (https://www.standardwebhooks.com, as used by Svix).

The signed content is ``f"{msg_id}.{timestamp}.{body}"``; the ``webhook-signature`` header
holds one ``v1,<base64 HMAC-SHA256>`` per active secret, space-separated, so a receiver
keeps verifying while a secret is being rotated (old and new are both sent).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets as _random
from collections.abc import Mapping, Sequence
from functools import lru_cache

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
DEFAULT_TOLERANCE_SECONDS = 300


def generate_secret() -> str:
    """A new signing secret: ``whsec_`` + base64 of 32 random bytes."""
    return SECRET_PREFIX + base64.b64encode(_random.token_bytes(SECRET_BYTES)).decode("ascii")


@lru_cache(maxsize=1024)
def _secret_key(secret: str) -> bytes:
    # Secrets are stored encrypted and decrypted per delivery; decoding them once per
    # process keeps signing at one HMAC per secret.
    encoded = secret[len(SECRET_PREFIX):] if secret.startswith(SECRET_PREFIX) else secret
    try:
        key = base64.b64decode(encoded, validate=True)
    except binascii.Error as exc:
        raise ValueError("signing secret is not valid base64") from exc
    if not key:
        raise ValueError("signing secret is empty")
    return key


def _signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> bytes:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    return hmac.new(key, signed, hashlib.sha256).digest()


def sign(secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` header value: one ``v1,<sig>`` per secret."""
    if not secrets:
        raise ValueError("at least one signing secret is required")
    return " ".join(
        "v1," + base64.b64encode(_signature(_secret_key(s), msg_id, timestamp, body)).decode()
        for s in secrets
    )


def signature_headers(
    secrets: Sequence[str], msg_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """``webhook-id``, ``webhook-timestamp`` and ``webhook-signature``."""
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secrets, msg_id, timestamp, body),
    }


def verify(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: int,
    tolerance_seconds: int = DEFAULT_TOLERANCE_SECONDS,
) -> bool:
    """Whether ``headers`` carry a valid, fresh signature of ``body`` under ``secret``."""
    lowered = {k.lower(): v for k, v in headers.items()}
    msg_id = lowered.get("webhook-id")
    raw_timestamp = lowered.get("webhook-timestamp", "")
    if not msg_id or not (raw_timestamp.isascii() and raw_timestamp.isdigit()):
        return False
    timestamp = int(raw_timestamp)
    if abs(now - timestamp) > tolerance_seconds:
        return False
    expected = _signature(_secret_key(secret), msg_id, timestamp, body)
    return any(_matches(candidate, expected) for candidate in lowered.get("webhook-signature", "").split())


def _matches(candidate: str, expected: bytes) -> bool:
    version, _, encoded = candidate.partition(",")
    if version != "v1":
        return False
    try:
        received = base64.b64decode(encoded, validate=True)
    except binascii.Error:
        return False
    return hmac.compare_digest(received, expected)
