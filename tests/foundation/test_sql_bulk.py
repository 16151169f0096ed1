"""apps.sql.bulk.Unnest: the placeholders, the row alias and the parameter arrays of an
unnest statement come from one column list, and run on PostgreSQL as written; the arrays it
builds in binary itself read back as the values psycopg would have sent."""

import json
import math
import uuid
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.db import DataError, connection, transaction
from psycopg.types.json import Jsonb

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
        (uuid.uuid4(), NOW, NOW, "queued", "", 0, 0, 0, None, -0.0),
        (uuid.uuid4(), NOW, NOW, "queued", "", 0, 0, 0, None, float("inf")),
        (uuid.uuid4(), NOW, NOW, "queued", "", 0, 0, 0, None, 1e-300),
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
    # built here: every kind but date, which psycopg dumps as before
    assert [isinstance(column, bytes) for column in params] == [True] * 8 + [False, True]
    read = read_back(KINDS, params)
    assert read == rows
    assert [math.copysign(1, row[-1]) for row in read if row[-1] == 0] == [1, -1]  # -0.0 == 0.0: its sign kept
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


JSON_AND_BOOLS = Unnest([("j", "jsonb"), ("b", "bool"), ("k", "boolean")])


@pytest.mark.django_db
def test_jsonb_and_bool_arrays_built_in_binary_read_back_as_their_values():
    if connection.vendor != "postgresql":
        pytest.skip("unnest with binary arrays is PostgreSQL's")
    values = [{"content-type": "text/plain", "x": "ünïcode ✓ caf\u00e9"}, [1, 2.5, None, True], {}, "text", 2**62,
              {"nested": {"a": [{"b": None}]}}]
    rows = [(Jsonb(value), flag, not flag) for value, flag in zip(values, [True, False] * 3)]
    rows.append((None, None, None))
    params = JSON_AND_BOOLS.params(rows)
    assert all(isinstance(column, bytes) for column in params)
    read = [(None if text is None else json.loads(text), b, k) for text, b, k in read_back(JSON_AND_BOOLS, params)]
    assert read == [(value, flag, other) for value, (_, flag, other) in zip([*values, None], rows)]


@pytest.mark.django_db
def test_what_orjson_refuses_goes_to_psycopg_and_reads_back_as_before():
    if connection.vendor != "postgresql":
        pytest.skip("unnest with binary arrays is PostgreSQL's")
    column = Unnest([("j", "jsonb")])
    for value in ({"big": 2**70}, {1: "an int key"}):
        params = column.params([(Jsonb(value),)])
        assert isinstance(params[0], list)  # psycopg's json.dumps decides, as before
        ((text,),) = read_back(column, params)
        assert json.loads(text) == ({"big": 2**70} if "big" in value else {"1": "an int key"})
    with pytest.raises(DataError), transaction.atomic():  # as before: PostgreSQL refuses a lone surrogate
        read_back(column, column.params([(Jsonb({"h": "caf\udce9"}),)]))
    # an int or a non-bool in a float8 or bool column: psycopg's, too
    mixed = Unnest([("f", "float8"), ("b", "bool")])
    assert all(isinstance(c, list) for c in mixed.params([(1, 1)]))
    assert isinstance(mixed.params([(1.5, True), (2.5, 1)])[1], list)  # True == 1: the 1 is still checked
