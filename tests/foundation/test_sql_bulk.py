"""apps.sql.bulk.Unnest: the placeholders, the row alias and the parameter arrays of an
unnest statement come from one column list, and run on PostgreSQL as written."""

import pytest
from django.db import connection

from apps.sql.bulk import Unnest, binding_cursor

PAIRS = Unnest([("id", "integer"), ("name", "text")])


def test_source_and_select_follow_the_column_list():
    assert PAIRS.source == "unnest(%b::integer[], %b::text[]) AS v(id, name)"
    assert PAIRS.select == "SELECT id, name FROM unnest(%b::integer[], %b::text[]) AS v(id, name)"
    assert Unnest([("n", "bigint")], alias="c", placeholder="%s").source == "unnest(%s::bigint[]) AS c(n)"


def test_params_are_one_array_per_column():
    assert PAIRS.params([(1, "a"), (2, "b")]) == [[1, 2], ["a", "b"]]
    assert PAIRS.params([]) == [[], []]


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
