"""API key format, hashing and verification.

A key reads ``csk_live_<lookup><secret>``: the 8-character lookup id is stored in clear
and indexed (it is the visible prefix in lists), so verification is one indexed lookup
plus one constant-time hash compare. Only a salted hash of the secret is stored.
"""

import hashlib
import hmac
import secrets
import string
from dataclasses import dataclass

KEY_PREFIX = "csk_live_"
LOOKUP_LENGTH = 8
SECRET_LENGTH = 40
_ALPHABET = string.ascii_letters + string.digits
_ALPHABET_SET = frozenset(_ALPHABET)  # checked on every authenticated request: a set test, not a loop


@dataclass(frozen=True)
class NewKey:
    full_key: str
    lookup: str
    salt: str
    secret_hash: str

    @property
    def visible_prefix(self):
        return KEY_PREFIX + self.lookup


def _random_text(length):
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def hash_secret(secret, salt):
    return hashlib.sha256(f"{salt}:{secret}".encode()).hexdigest()


def generate_key():
    lookup = _random_text(LOOKUP_LENGTH)
    secret = _random_text(SECRET_LENGTH)
    salt = secrets.token_hex(8)
    return NewKey(KEY_PREFIX + lookup + secret, lookup, salt, hash_secret(secret, salt))


def split_key(full_key):
    """Return (lookup, secret), or None when the text is not shaped like one of our keys."""
    if not isinstance(full_key, str) or not full_key.startswith(KEY_PREFIX):
        return None
    body = full_key[len(KEY_PREFIX):]
    if len(body) != LOOKUP_LENGTH + SECRET_LENGTH or not _ALPHABET_SET.issuperset(body):
        return None
    return body[:LOOKUP_LENGTH], body[LOOKUP_LENGTH:]


def secret_matches(secret, salt, secret_hash):
    return hmac.compare_digest(hash_secret(secret, salt), secret_hash)
