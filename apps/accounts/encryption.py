"""Encrypted model fields, keyed by settings.ENCRYPTION_KEYS."""

import json
from functools import lru_cache

from django.conf import settings
from django.db import models

from cronsvc.crypto import Encryptor


@lru_cache(maxsize=1)
def _encryptor(keys):
    return Encryptor(list(keys))


def encryptor():
    return _encryptor(tuple(settings.ENCRYPTION_KEYS))


class EncryptedField(models.TextField):
    """A value stored as a Fernet token: secrets never sit in the database in clear.

    Subclasses say how their Python value becomes text (``encode``) and back (``decode``).
    rotation.py finds every field of this kind, so a new encrypted field is rotated too.
    """

    def encode(self, value):
        raise NotImplementedError

    def decode(self, text):
        raise NotImplementedError

    def from_db_value(self, value, expression, connection):
        if value is None or value == "":
            return None
        return self.decode(encryptor().decrypt(value))

    def get_prep_value(self, value):
        if value is None:
            return None
        return encryptor().encrypt(self.encode(value))


class EncryptedJSONField(EncryptedField):
    """A JSON value (auth credentials, secret headers, signing secrets)."""

    def encode(self, value):
        return json.dumps(value, separators=(",", ":"))

    def decode(self, text):
        return json.loads(text)

    def to_python(self, value):
        if value is None or not isinstance(value, str):
            return value
        return json.loads(value)

    def value_to_string(self, obj):
        return json.dumps(self.value_from_object(obj))


class EncryptedTextField(EncryptedField):
    """A string (a TOTP seed)."""

    def encode(self, value):
        return str(value)

    def decode(self, text):
        return text
