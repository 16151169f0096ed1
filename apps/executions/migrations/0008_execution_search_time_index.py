"""History search, part two (apps.executions.search, the widening windows): a plain btree
on ``scheduled_for`` for PostgreSQL to AND with ``exec_search``.

A search reads its matches one time window at a time, newest first. PostgreSQL does not
AND two bitmap scans that use the same condition, and both ``exec_search`` (organization,
words) and ``exec_org_latest`` (organization, time) use the organization: it would rather
walk ``exec_job_latest`` or ``execution_unique_occurrence`` whole for the time (8,700 pages,
130 ms on 1M runs) or fetch every match from the heap. An index on the time alone carries no
condition in common with ``exec_search`` (not even a predicate: hence not partial), so a
window costs its own few hundred entries (0.3 ms). Built CONCURRENTLY: an existing history
is indexed while the scheduler and the workers keep writing. Nothing on SQLite.
"""

from django.db import migrations

from apps.sql.indexes import concurrent_index

create, drop = concurrent_index("exec_search_time", "executions.Execution", "(scheduled_for)")


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("executions", "0007_execution_deferral"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
