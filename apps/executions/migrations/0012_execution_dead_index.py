"""The dead letter's own index: the organization's dead runs by time (issue 38).

The dead-letter list (``/api/v1/dead-letter/``, the dead-letter page, ``?status=dead``) asks
an organization's dead runs newest first. Dead runs are a sliver of a history, so without an
index of their own PostgreSQL walks ``exec_org_latest`` newest first and throws away every
run that is not dead until it has a page: all of the organization's history when it has
fewer dead runs than a page (bench/README.md: the whole 10M-row history for the first page).
A partial index holds only the dead runs, in the list's order. Built CONCURRENTLY: an
existing history is indexed while the scheduler and the workers keep writing. Nothing on
SQLite (the embedded mode's histories are small).
"""

from django.db import migrations

INDEX_NAME = "exec_org_dead"


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    table = schema_editor.quote_name(apps.get_model("executions", "Execution")._meta.db_table)
    with schema_editor.connection.cursor() as cursor:  # a failed concurrent build leaves an invalid index
        cursor.execute("SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                       "WHERE c.relname = %s AND NOT i.indisvalid", [INDEX_NAME])
        if cursor.fetchone():
            schema_editor.execute(f"DROP INDEX CONCURRENTLY {INDEX_NAME}")
    schema_editor.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX_NAME} ON {table} "
                          "(organization_id, scheduled_for DESC, id DESC) WHERE status = 'dead'")


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX_NAME}")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("executions", "0011_usage_from_billing"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
