"""History search (apps.executions.search): on PostgreSQL, a GIN index over each execution's
organization and the words of its error message and response body.

An expression index rather than a column: the scheduler's and the workers' hand-written
INSERT and UPDATE statements stay as they are. Only executions with a text are in it (its
predicate), so the scheduler's inserts of queued runs and the claim of a run never touch it;
the one write that does is the run's finish. btree_gin puts the organization in the same
index, so a search reads one tenant's matches only, however common the words are elsewhere.

The words come from a PL/pgSQL function, ``execution_search_words``, rather than from
``to_tsvector(...)`` written out, for the planner's sake: a PL/pgSQL function is never inlined,
so its declared COST stands, and it says what to_tsvector over a 16 KiB body really costs.
Without it PostgreSQL reads a fairly common word ("refused", 1 % of the runs) by walking the
organization's history newest first and computing the words of every row (0.5 s measured),
where the index would answer in 1 ms. PARALLEL RESTRICTED keeps such a scan from being
spread over parallel workers, whose start costs more than a page of history. The extended statistics on the same expression give
the planner the words' frequencies (a partial index's own statistics are not used).

Built CONCURRENTLY (hence not atomic): an existing history is indexed while the workers keep
recording. Nothing on SQLite, whose searches are plain substring matches.
"""

from django.db import migrations

# As apps.executions.search queries it (tests/api/test_execution_search.py checks the plan
# uses it). Frozen here: a different expression needs a new migration.
INDEX_NAME = "exec_search"
STATISTICS_NAME = "exec_search_words"
FUNCTION_SQL = (
    "CREATE OR REPLACE FUNCTION execution_search_words(error_message text, response_body text) "
    "RETURNS tsvector LANGUAGE plpgsql IMMUTABLE PARALLEL RESTRICTED COST 10000 AS "
    "$$ BEGIN RETURN to_tsvector('simple'::regconfig, error_message || ' ' || response_body); END $$")
DOCUMENT_SQL = "execution_search_words(error_message, response_body)"
HAS_TEXT_SQL = "error_message <> '' OR response_body <> ''"


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    table = schema_editor.quote_name(apps.get_model("executions", "Execution")._meta.db_table)
    schema_editor.execute("CREATE EXTENSION IF NOT EXISTS btree_gin")
    schema_editor.execute(FUNCTION_SQL)
    # A build that failed half-way leaves an invalid index of the same name: start again.
    if _invalid(schema_editor):
        schema_editor.execute(f"DROP INDEX CONCURRENTLY {INDEX_NAME}")
    schema_editor.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX_NAME} ON {table} "
                          f"USING gin (organization_id, ({DOCUMENT_SQL})) WHERE {HAS_TEXT_SQL}")
    schema_editor.execute(f"CREATE STATISTICS IF NOT EXISTS {STATISTICS_NAME} ON ({DOCUMENT_SQL}) FROM {table}")
    schema_editor.execute(f"ANALYZE {table}")


def _invalid(schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                       "WHERE c.relname = %s AND NOT i.indisvalid", [INDEX_NAME])
        return cursor.fetchone() is not None


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP STATISTICS IF EXISTS {STATISTICS_NAME}")
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX_NAME}")
        schema_editor.execute("DROP FUNCTION IF EXISTS execution_search_words(text, text)")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("executions", "0004_deleted_job_purge"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
