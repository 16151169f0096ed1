"""apps.sql.pgtypes: timestamptz read by psycopg's own loader gives exactly what
Django's loader gives (aware, datetime.timezone.utc), at every edge."""

from datetime import timezone as dt_timezone

import pytest
from django.db import connection
from django.db.backends.postgresql.psycopg_any import register_tzloader

from apps.sql.pgtypes import UtcTimestamptzLoader

pytestmark = pytest.mark.django_db

LITERALS = [
    "2026-11-30 04:15:55.440750+00",
    "2026-03-29 00:59:59.999999+00",  # the second before Europe's clocks go forward
    "2026-10-25 01:30:00+02",  # an offset other than UTC
    "2027-01-01 00:00:00-09:30",
    "0001-01-01 00:00:00+00",
    "9999-12-31 23:59:59.999999+00",
    "1969-12-31 23:59:59.5+00",  # before the epoch, with a fraction
]


def read(sql_literals, *, django_loader):
    with connection.cursor() as cursor:
        if django_loader:
            register_tzloader(dt_timezone.utc, cursor.cursor)
        cursor.execute("SELECT " + ", ".join("%s::timestamptz" for _ in sql_literals), sql_literals)
        return cursor.fetchone()


def test_connections_read_timestamptz_with_the_native_loader():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    connection.ensure_connection()
    from psycopg.pq import Format

    loader = connection.connection.adapters.get_loader(connection.connection.adapters.types["timestamptz"].oid,
                                                       Format.TEXT)
    assert loader is UtcTimestamptzLoader


def test_values_equal_djangos_to_the_microsecond_and_the_timezone_object():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    ours, djangos = read(LITERALS, django_loader=False), read(LITERALS, django_loader=True)
    assert ours == djangos
    assert [value.tzinfo for value in ours] == [dt_timezone.utc] * len(LITERALS)
    assert [value.isoformat() for value in ours] == [value.isoformat() for value in djangos]


def test_values_are_read_without_a_python_call_each():
    """The loader's ``load`` is the C loader's own method: no Python frame per value."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    import sys

    called = set()

    def record(frame, event, arg):
        if event == "call":
            called.add(frame.f_code)

    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::timestamptz FROM generate_series(1, 50)", [LITERALS[0]])
        sys.setprofile(record)
        try:
            rows = cursor.fetchall()
        finally:
            sys.setprofile(None)
    assert len(rows) == 50 and rows[0][0].tzinfo is dt_timezone.utc
    assert UtcTimestamptzLoader.load.__code__ not in called


JSON_LITERALS = [
    "[]", "{}", "null", '"text"', "true", "0", "-0", "1.0", "1.5e-7", "0.1", "-12.75",
    '{"b": [1, {"c": null}], "a": "\\u00e9\\u2028"}',
    "9223372036854775807",  # the largest 64-bit integer: orjson's own
    "123456789012345678901234567890",  # beyond 64 bits: orjson would make it a float
    "1e400",  # beyond a float: orjson refuses it, json makes it inf
    '"1234567890123456789012"',  # a long digit string (read the slow way, alike)
]


@pytest.mark.parametrize("literal", JSON_LITERALS)
def test_json_columns_read_as_djangos_json_field_reads_them(literal):
    """pgtypes.JSONField (orjson) gives exactly what Django's JSONField (json.loads) gives,
    of the same type, from what PostgreSQL writes back for the value."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    from django.db import models

    from apps.sql.pgtypes import JSONField

    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::jsonb::text", [literal])
        text = cursor.fetchone()[0]
    ours = JSONField().from_db_value(text, None, connection)
    djangos = models.JSONField().from_db_value(text, None, connection)
    assert repr(ours) == repr(djangos)


def test_json_field_is_djangos_to_migrations():
    from django.db import models

    from apps.sql.pgtypes import JSONField

    assert JSONField(default=list, blank=True).deconstruct()[1:] == \
        models.JSONField(default=list, blank=True).deconstruct()[1:]
