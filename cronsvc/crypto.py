"""Field-level encryption for secrets at rest (Fernet, several keys for rotation).

Keys come from the environment, never from the database: the first key encrypts, every
key decrypts, so a new key can be put first, everything re-encrypted, and the old key
removed.
"""

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

__all__ = ["Encryptor", "InvalidToken", "derive_key", "new_key"]


def new_key():
    return Fernet.generate_key().decode()


def derive_key(secret):
    """A Fernet key derived from another secret (used when no ENCRYPTION_KEYS are set)."""
    digest = hashlib.sha256(b"cronsvc-field-encryption:" + secret.encode()).digest()
    return base64.urlsafe_b64encode(digest).decode()


class Encryptor:
    def __init__(self, keys):
        if not keys:
            raise ValueError("at least one encryption key is needed")
        self._fernet = MultiFernet([Fernet(key.encode() if isinstance(key, str) else key) for key in keys])
        self._primary = Fernet(keys[0].encode() if isinstance(keys[0], str) else keys[0])

    def encrypt(self, text):
        return self._fernet.encrypt(text.encode()).decode()

    def decrypt(self, token):
        return self._fernet.decrypt(token.encode()).decode()

    def rotate(self, token):
        """Re-encrypt under the newest key (a no-op in effect if it already is)."""
        return self._fernet.rotate(token.encode()).decode()

    def is_current(self, token):
        try:
            self._primary.decrypt(token.encode())
        except InvalidToken:
            return False
        return True
