"""History search (apps.executions.search): on PostgreSQL, a GIN index over each execution's
organization and the words of its error message and response body.

An expression index rather than a column: the scheduler's and the workers' hand-written
INSERT and UPDATE statements stay as they are. Only executions with a text are in it (its
predicate), so the scheduler's inserts of queued runs and the claim of a run never touch it;
the one write that does is the run's finish. btree_gin puts the organization in the same
index, so a search reads one tenant's matches only, however common the words are elsewhere.

Built CONCURRENTLY (hence not atomic): an existing history is indexed while the workers keep
recording. Nothing on SQLite, whose searches are plain substring matches.
"""

from django.db import migrations

# As apps.executions.search queries it (tests/api/test_execution_search.py checks the plan
# uses it). Frozen here: a different expression needs a new migration.
INDEX_NAME = "exec_search"
DOCUMENT_SQL = "to_tsvector('simple'::regconfig, error_message || ' ' || response_body)"
HAS_TEXT_SQL = "error_message <> '' OR response_body <> ''"


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    table = schema_editor.quote_name(apps.get_model("executions", "Execution")._meta.db_table)
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    # A build that failed half-way leaves an invalid index of the same name: start again.
    if _invalid(schema_editor):
        schema_editor.execute(f"DROP INDEX CONCURRENTLY {INDEX_NAME}")
    schema_editor.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX_NAME} ON {table} "
                          f"USING gin (organization_id, ({DOCUMENT_SQL})) WHERE {HAS_TEXT_SQL}")


def _invalid(schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                       "WHERE c.relname = %s AND NOT i.indisvalid", [INDEX_NAME])
        return cursor.fetchone() is not None


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX_NAME}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("executions", "0004_deleted_job_purge"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
