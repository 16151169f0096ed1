"""Indexes a migration builds CONCURRENTLY on PostgreSQL: a table already holding a history
is indexed while the scheduler and the workers keep writing to it. Nothing on SQLite (the
embedded mode's tables are small, and it has no such build)."""

from functools import partial

from .modes import on_postgresql


def concurrent_index(name, model, definition):
    """(create, drop) for ``migrations.RunPython`` in a migration with ``atomic = False``:
    index ``name`` on ``model``'s table ("app_label.Model", read from the migration's state)
    with ``definition`` (the columns in parentheses, then any ``WHERE``)."""
    return partial(_create, name, model, definition), partial(_drop, name)


def _create(name, model, definition, apps, schema_editor):
    if not on_postgresql(schema_editor.connection):
        return
    table = schema_editor.quote_name(apps.get_model(model)._meta.db_table)
    drop_if_invalid(schema_editor, name)
    schema_editor.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} {definition}")


def _drop(name, apps, schema_editor):
    if on_postgresql(schema_editor.connection):
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")


def drop_if_invalid(schema_editor, name):
    """A failed concurrent build leaves an invalid index behind: dropped, to be built again."""
    if not on_postgresql(schema_editor.connection):
        return
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
                       "WHERE c.relname = %s AND NOT i.indisvalid", [name])
        if cursor.fetchone():
            schema_editor.execute(f"DROP INDEX CONCURRENTLY {name}")
