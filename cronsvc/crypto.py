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
    #: Tokens whose text ``decrypt`` keeps. A worker reads the same secrets (a project's
    #: signing secrets, a job's auth) batch after batch, and Fernet's check and decryption
    #: cost more than the rest of building the row (bench/README.md, "Figures behind the
    #: code"). A token's text never changes (a rotated secret is a new token), and a process
    #: holds these secrets in its rows anyway.
    DECRYPTED_KEPT = 4096

    def __init__(self, keys):
        if not keys:
            raise ValueError("at least one encryption key is needed")
        self._fernet = MultiFernet([Fernet(key.encode() if isinstance(key, str) else key) for key in keys])
        self._primary = Fernet(keys[0].encode() if isinstance(keys[0], str) else keys[0])
        self._decrypted = {}

    def encrypt(self, text):
        return self._fernet.encrypt(text.encode()).decode()

    def decrypt(self, token):
        text = self._decrypted.get(token)
        if text is None:
            text = self._fernet.decrypt(token.encode()).decode()
            if len(self._decrypted) >= self.DECRYPTED_KEPT:
                self._decrypted.clear()  # simpler than an LRU, and as good for a working set this size
            self._decrypted[token] = text
        return text

    def rotate(self, token):
        """Re-encrypt under the newest key (a no-op in effect if it already is)."""
        return self._fernet.rotate(token.encode()).decode()

    def is_current(self, token):
        try:
            self._primary.decrypt(token.encode())
        except InvalidToken:
            return False
        return True
