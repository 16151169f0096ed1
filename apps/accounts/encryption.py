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


class EncryptedJSONField(models.TextField):
    """A JSON value stored as a Fernet token: secrets never sit in the database in clear."""

    def from_db_value(self, value, expression, connection):
        if value is None or value == "":
            return None
        return json.loads(encryptor().decrypt(value))

    def to_python(self, value):
        if value is None or not isinstance(value, str):
            return value
        return json.loads(value)

    def get_prep_value(self, value):
        if value is None:
            return None
        return encryptor().encrypt(json.dumps(value, separators=(",", ":")))

    def value_to_string(self, obj):
        return json.dumps(self.value_from_object(obj))
