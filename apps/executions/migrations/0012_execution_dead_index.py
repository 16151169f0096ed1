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

from apps.sql.indexes import concurrent_index

create, drop = concurrent_index("exec_org_dead", "executions.Execution",
                                "(organization_id, scheduled_for DESC, id DESC) WHERE status = 'dead'")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("executions", "0011_usage_from_billing"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
