"""Which database cronsvc runs on: PostgreSQL (the server mode) or SQLite (the embedded
mode, ``make run``).

A hot path that PostgreSQL serves with SQL of its own (binary arrays, ``FOR UPDATE SKIP
LOCKED``, ``RETURNING``, advisory locks) and SQLite with the ORM has both implementations
side by side, and one dispatcher, the path's only function that calls ``on_postgresql()``,
picks one of them. Nothing else asks which database it is on
(tests/foundation/test_database_modes.py).
"""

from django.db import connection, connections


def on_postgresql(using=None):
    """Whether the database (the default one, a database alias or a connection) is
    PostgreSQL."""
    if using is None:
        using = connection
    elif isinstance(using, str):
        using = connections[using]
    return using.vendor == "postgresql"
