"""The workflows app's hand-written SQL (PostgreSQL) and the cursors that run it: the
look-up that tells which finished jobs have downstream jobs and the workflow run's
advisory lock (triggering.py). The logic around them, and the ORM path of the embedded
mode's SQLite, stay in triggering.py."""

import psycopg
from django.db import connection

from apps.jobs.models import JobDependency

#: Which of the jobs (a binary uuid array) are the upstream of a dependency.
HAVING_DOWNSTREAM = (f"SELECT DISTINCT upstream_id FROM {connection.ops.quote_name(JobDependency._meta.db_table)} "
                     "WHERE upstream_id = ANY(%b::uuid[])")
#: A transaction-scoped advisory lock on one key (text).
LOCK = "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))"


def having_downstream(job_ids):
    """Which of ``job_ids`` have downstream jobs: one indexed statement, sent like
    recording's own (binary array, psycopg directly on Django's connection, in its
    transaction), so a worker's per-group cost stays fixed."""
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(HAVING_DOWNSTREAM, [list(job_ids)])
        return {row[0] for row in cursor.fetchall()}


def lock_workflow_run(run_id):
    """Hold the workflow run's advisory lock until the transaction ends."""
    with connection.cursor() as cursor:
        cursor.execute(LOCK, [f"workflow-run:{run_id}"])
