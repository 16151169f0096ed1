"""The event stream's hand-written SQL (PostgreSQL): the outbox's insert of a few entries
(apps.eventstream.outbox.add, inside the caller's transaction), and the relay's advisory
lock and numbering of the entries (apps.eventstream.relay). The outbox's columns and
``insert_sql`` are here too, for the statements that write entries in a CTE of their own
change (apps.executions.queries, through apps.eventstream.outbox). The logic around them,
and the ORM paths of the embedded mode's SQLite, are in outbox.py and relay.py."""

from django.db import connection

from apps.sql.bulk import Unnest, binding_cursor

from .models import OutboxEntry

TABLE = OutboxEntry._meta.db_table

# --- the outbox (apps.eventstream.outbox) ------------------------------------------------

#: The outbox columns a writer sets, with their types, in the order of an
#: apps.eventstream.outbox.Entry (``detail`` a JSON object of extra facts).
ENTRY_COLUMNS = (("kind", "text"), ("status", "text"), ("previous", "text"), ("organization_id", "uuid"),
                 ("project_id", "uuid"), ("subject_id", "uuid"), ("execution_id", "uuid"), ("attempt", "integer"),
                 ("reason", "text"), ("detail", "jsonb"), ("occurred_at", "timestamptz"))
COLUMNS = ", ".join(name for name, _ in ENTRY_COLUMNS)
_ENTRIES = Unnest(ENTRY_COLUMNS)


def insert_sql(select):
    """``INSERT INTO <outbox> (<columns>) <select>``: ``select`` yields the Entry columns in order."""
    return f"INSERT INTO {TABLE} ({COLUMNS}) {select}"


INSERT_ENTRIES = insert_sql(_ENTRIES.select)


def insert_entries(entries):
    """Write ``entries`` (Entry, their ``detail`` plain JSON values) in one statement, in
    the caller's transaction."""
    from psycopg.types.json import Jsonb

    with binding_cursor() as cursor:
        cursor.execute(INSERT_ENTRIES,
                       _ENTRIES.params(entry._replace(detail=Jsonb(entry.detail)) for entry in entries))


# --- the relay (apps.eventstream.relay) --------------------------------------------------

TRY_LOCK = "SELECT pg_try_advisory_xact_lock(%s)"
#: Number up to ``batch`` entries not numbered yet, in the order they were written, from
#: the last number given plus one.
NUMBER_ENTRIES = (
    f"UPDATE {TABLE} SET stream_id = n.sid FROM ("
    f"SELECT id, %s + row_number() OVER (ORDER BY id) AS sid FROM {TABLE} "
    "WHERE stream_id IS NULL ORDER BY id LIMIT %s) AS n "
    f"WHERE {TABLE}.id = n.id"
)


def try_transaction_lock(key):
    """Take the advisory lock ``key`` until the transaction ends, unless another holds it;
    returns whether it was taken."""
    with connection.cursor() as cursor:
        cursor.execute(TRY_LOCK, [key])
        return cursor.fetchone()[0]


def number_entries(last_id, batch):
    """Give stream ids ``last_id + 1`` on to at most ``batch`` entries not numbered yet,
    oldest first; returns how many were numbered."""
    with connection.cursor() as cursor:
        cursor.execute(NUMBER_ENTRIES, [last_id, batch])
        return cursor.rowcount
