"""Set-based statements over arrays: one array per column, unpacked by PostgreSQL's
``unnest`` into rows, so a group of any size is one statement and nothing is quoted into
the SQL text.

A statement names its columns once, with their PostgreSQL types, as an ``Unnest``; the
placeholders, the row alias's column list and the arrays of the parameters all come from
that one list, so a column added or moved cannot leave them out of step.
"""

from contextlib import contextmanager

import psycopg
from django.db import connection


class Unnest:
    """``unnest(%b::uuid[], %b::text[], ...) AS v(id, status, ...)`` from ``columns``, a
    sequence of (name, PostgreSQL type) pairs in the order the rows give their values.

    ``placeholder`` is ``%b`` for binary parameters (``binding_cursor``) or ``%s`` for a
    Django cursor."""

    def __init__(self, columns, *, alias="v", placeholder="%b"):
        self.columns = tuple(columns)
        self.names = tuple(name for name, _ in self.columns)
        self.alias = alias
        self.arrays = ", ".join(f"{placeholder}::{kind}[]" for _, kind in self.columns)

    @property
    def source(self):
        """``unnest(...) AS <alias>(<names>)``, for a FROM clause."""
        return f"unnest({self.arrays}) AS {self.alias}({', '.join(self.names)})"

    @property
    def select(self):
        """``SELECT <names> FROM unnest(...) AS <alias>(<names>)``, for an INSERT ... SELECT."""
        return f"SELECT {', '.join(self.names)} FROM {self.source}"

    def params(self, rows):
        """One list per column from ``rows`` (each a sequence of values in column order)."""
        width = len(self.columns)
        rows = list(rows)
        for row in rows:
            if len(row) != width:
                raise ValueError(f"a row of {len(row)} values for the {width} columns {self.names}")
        # transposed by zip, in C: a Python loop per value is a visible share of a scheduler's tick
        return [list(column) for column in zip(*rows)] if rows else [[] for _ in range(width)]


@contextmanager
def binding_cursor(*, prepare=True, db=None):
    """A server-side-binding psycopg cursor on Django's connection (same transaction), its
    errors wrapped as Django's: the arrays go out in binary (``%b``) instead of being quoted
    into the SQL text.

    Its statements are prepared on the connection the first time they run there
    (``prepare=False``: not, for SQL whose text varies, such as the ORM's): the set-based
    statements of the hot paths are few and of fixed text, and PostgreSQL planned them again
    for every batch and group: about 1 ms a claim and a recorded group together, as much as
    running them for a group of a few runs (bench/README.md, "Figures behind the code"). DATABASE_PREPARED_STATEMENTS=false
    (apps.sql.backend) prepares nothing. ``db``: another connection than Django's default."""
    db = db or connection
    db.ensure_connection()
    cursor_class = _PreparingCursor if prepare else psycopg.Cursor
    with db.wrap_database_errors, cursor_class(db.connection) as cursor:
        yield cursor


class _PreparingCursor(psycopg.Cursor):
    """Prepares every statement it executes (psycopg prepares nothing while the connection's
    ``prepare_threshold`` is None: DATABASE_PREPARED_STATEMENTS=false)."""

    def execute(self, query, params=None, *, prepare=True, binary=None):
        return super().execute(query, params, prepare=prepare, binary=binary)
