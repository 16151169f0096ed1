"""apps.sql.bulk.Unnest: the placeholders, the row alias and the parameter arrays of an
unnest statement come from one column list, and run on PostgreSQL as written; the arrays it
builds in binary itself read back as the values psycopg would have sent."""

import uuid
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import DataError, connection, transaction

from apps.sql.bulk import Unnest, binding_cursor

PAIRS = Unnest([("id", "integer"), ("name", "text")])


def test_source_and_select_follow_the_column_list():
    assert PAIRS.source == "unnest(%b::integer[], %b::text[]) AS v(id, name)"
    assert PAIRS.select == "SELECT id, name FROM unnest(%b::integer[], %b::text[]) AS v(id, name)"
    assert Unnest([("n", "bigint")], alias="c", placeholder="%s").source == "unnest(%s::bigint[]) AS c(n)"


def test_params_are_one_array_per_column():
    plain = Unnest(PAIRS.columns, placeholder="%s")  # a Django cursor's: lists, psycopg quotes them
    assert plain.params([(1, "a"), (2, "b")]) == [[1, 2], ["a", "b"]]
    assert plain.params([]) == [[], []]


def test_a_row_of_the_wrong_width_is_refused():
    with pytest.raises(ValueError, match="2 columns"):
        PAIRS.params([(1, "a", "extra")])


@pytest.mark.django_db
def test_the_statement_runs_on_postgresql():
    if connection.vendor != "postgresql":
        pytest.skip("unnest with binary arrays is PostgreSQL's")
    with binding_cursor() as cursor:
        cursor.execute(f"{PAIRS.select} ORDER BY id", PAIRS.params([(2, "b"), (1, "a")]))
        assert cursor.fetchall() == [(1, "a"), (2, "b")]


KINDS = Unnest([("u", "uuid"), ("t", "timestamptz"), ("w", "timestamp with time zone"), ("s", "varchar(12)"),
                ("x", "text"), ("i", "integer"), ("h", "smallint"), ("b", "bigint"), ("d", "date"), ("f", "float8")])
NOW = datetime(2027, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def rows_of_every_kind():
    return [
        (uuid.uuid4(), NOW, NOW.astimezone(ZoneInfo("Asia/Kathmandu")), "queued", "ünïcode ✓", 7, 3, 2**40,
         date(2027, 3, 1), 1.5),
        (None, None, None, None, None, None, None, None, None, None),
        (uuid.uuid4(), NOW, datetime(1970, 1, 1, tzinfo=UTC), "", "", -(2**31), -(2**15), -(2**63), None, -0.25),
        (uuid.uuid4(), NOW - timedelta(days=40_000), datetime(9999, 12, 31, tzinfo=UTC), "queued", "x" * 3000,
         2**31 - 1, 2**15 - 1, 2**63 - 1, date(1999, 12, 31), 0.0),
    ]


def read_back(unnest, params):
    with binding_cursor() as cursor:
        cursor.execute(f"SELECT * FROM {unnest.source}", params)
        return cursor.fetchall()


@pytest.mark.django_db
def test_arrays_built_in_binary_read_back_as_their_values():
    if connection.vendor != "postgresql":
        pytest.skip("unnest with binary arrays is PostgreSQL's")
    rows = rows_of_every_kind()
    params = KINDS.params(rows)
    # built here: every kind but date and float8, which psycopg dumps as before
    assert [isinstance(column, bytes) for column in params] == [True] * 8 + [False, False]
    assert read_back(KINDS, params) == rows
    assert read_back(KINDS, KINDS.params([])) == []


@pytest.mark.django_db
def test_a_column_this_cannot_build_goes_to_psycopg_as_a_list():
    if connection.vendor != "postgresql":
        pytest.skip("unnest with binary arrays is PostgreSQL's")
    odd = Unnest([("t", "timestamptz"), ("u", "uuid"), ("i", "integer")])
    naive = datetime(2027, 3, 1, 12, 0)  # psycopg sends a naive datetime as a timestamp; the cast reads it
    params = odd.params([(naive, str(uuid.UUID(int=5)), 2**40)])
    assert all(isinstance(column, list) for column in params)
    with pytest.raises(DataError), transaction.atomic():  # as before: PostgreSQL refuses it
        read_back(odd, params)
    naive_as_read = read_back(Unnest([("t", "timestamptz")], placeholder="%s"), [[naive]])
    assert read_back(odd, odd.params([(naive, str(uuid.UUID(int=5)), 1)])) == [
        (naive_as_read[0][0], uuid.UUID(int=5), 1)]
