"""How PostgreSQL values are read, where Django's default costs more than it must."""

import re
from datetime import timezone as dt_timezone

import orjson
from django.db import models
from psycopg import adapters
from psycopg.adapt import Loader
from psycopg.pq import Format

from .modes import on_postgresql

_TIMESTAMPTZ = adapters.types["timestamptz"].oid
_NATIVE = adapters.get_loader(_TIMESTAMPTZ, Format.TEXT)  # C with psycopg[binary]


class UtcTimestamptzLoader(Loader):
    """psycopg's own timestamptz loader behind the ``timezone`` attribute Django checks
    before each cursor (its C class takes no subclass). Its ``load`` is the C loader's bound
    method, set on the instance: psycopg takes ``loader.load`` once per result, so each value
    is read with no Python call in between (250 on a page of 50 executions)."""

    timezone = dt_timezone.utc

    def __init__(self, oid, context=None):
        super().__init__(oid, context)
        self.load = _NATIVE(oid, context).load

    def load(self, data):  # shadowed by the instance's (the abstract method must be defined)
        return _NATIVE(self.oid, None).load(data)


def use_native_timestamptz_loader(sender, connection, **kwargs):
    """On a UTC connection (USE_TZ, the default), read timestamptz with psycopg's loader
    instead of Django's Python one: both return datetimes in datetime.timezone.utc (Django's
    exists to pin other connection timezones), psycopg's several times faster, and a page of
    50 executions holds some 250 of them."""
    if not on_postgresql(connection) or connection.timezone_name != "UTC":
        return
    connection.connection.adapters.register_loader(_TIMESTAMPTZ, UtcTimestamptzLoader)


_LONG_DIGITS = re.compile(r"\d{19}").search  # an integer orjson may not keep exact (or a long digit string)


class JSONField(models.JSONField):
    """Django's JSONField, its values read by orjson: ``json.loads`` costs about ten Python
    calls a value (the decoder's scanner, its regular expressions), and a page of 50 jobs or
    executions reads 150 to 200 of them. PostgreSQL writes jsonb as plain JSON, which both
    read alike but for what orjson refuses (a number beyond a float's range) and integers
    beyond 64 bits (orjson makes them floats): those texts, and a
    field with a decoder of its own, go to Django's reading. Migrations see Django's field:
    the class only changes how a value is read."""

    def from_db_value(self, value, expression, connection):
        if value.__class__ is str and self.decoder is None and not _LONG_DIGITS(value):
            try:
                return orjson.loads(value)
            except orjson.JSONDecodeError:
                pass
        return super().from_db_value(value, expression, connection)

    def deconstruct(self):
        name, _, args, kwargs = super().deconstruct()
        return name, "django.db.models.JSONField", args, kwargs
