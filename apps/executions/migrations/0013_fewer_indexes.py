"""Two indexes fewer to write for every scheduled run (issue 38; bench/README.md, "Issue 38"):

- ``exec_job_latest`` (job, -scheduled_for) is dropped: the unique occurrence index (job,
  scheduled_for, trigger) leads with the same two columns, and PostgreSQL reads it backwards
  for a job's runs newest first (the plans of the query paths that used it are in
  bench/README.md).
- the index on ``workflow_run_id`` becomes partial (``exec_workflow_run``, only where set):
  every query names a workflow run (``workflow_run_id = ...``, which implies NOT NULL) or
  looks a run up by id, and scheduled runs, the most by far, belong to no workflow.

On PostgreSQL the indexes are dropped and built CONCURRENTLY (the scheduler and the workers
keep writing meanwhile; a failed concurrent build's invalid index is dropped and built
again). SQLite (embedded mode) runs the same statements without CONCURRENTLY.
"""

from django.db import migrations, models

from apps.sql.indexes import drop_if_invalid

#: The name Django gave the field's ``db_index`` (a hash of the table and column names).
OLD_WORKFLOW_INDEX = "executions_execution_workflow_run_id_260665ae"


def _concurrently(schema_editor):
    return " CONCURRENTLY" if schema_editor.connection.vendor == "postgresql" else ""


def _table(apps, schema_editor):
    return schema_editor.quote_name(apps.get_model("executions", "Execution")._meta.db_table)


def forwards(apps, schema_editor):
    how = _concurrently(schema_editor)
    drop_if_invalid(schema_editor, "exec_workflow_run")
    schema_editor.execute(f"CREATE INDEX{how} IF NOT EXISTS exec_workflow_run ON {_table(apps, schema_editor)} "
                          "(workflow_run_id) WHERE workflow_run_id IS NOT NULL")
    schema_editor.execute(f"DROP INDEX{how} IF EXISTS {OLD_WORKFLOW_INDEX}")
    schema_editor.execute(f"DROP INDEX{how} IF EXISTS exec_job_latest")


def backwards(apps, schema_editor):
    how, table = _concurrently(schema_editor), _table(apps, schema_editor)
    schema_editor.execute(f"CREATE INDEX{how} IF NOT EXISTS exec_job_latest ON {table} (job_id, scheduled_for DESC)")
    schema_editor.execute(f"CREATE INDEX{how} IF NOT EXISTS {OLD_WORKFLOW_INDEX} ON {table} (workflow_run_id)")
    schema_editor.execute(f"DROP INDEX{how} IF EXISTS exec_workflow_run")


class Migration(migrations.Migration):
    atomic = False  # CREATE / DROP INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("accounts", "0012_organization_plan_from_plans"),
        ("executions", "0012_execution_dead_index"),
        ("jobs", "0013_job_connect_timeout"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveIndex(model_name="execution", name="exec_job_latest"),
                migrations.AlterField(model_name="execution", name="workflow_run_id",
                                      field=models.UUIDField(blank=True, null=True)),
                migrations.AddIndex(model_name="execution", index=models.Index(
                    condition=models.Q(("workflow_run_id__isnull", False)), fields=["workflow_run_id"],
                    name="exec_workflow_run")),
            ],
            database_operations=[migrations.RunPython(forwards, backwards)],
        ),
    ]
