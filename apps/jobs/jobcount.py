"""Each organization's job count, kept by the database itself.

A create checks the plan's max_jobs; counting the organization's jobs for it reads all of
them (5 ms at 10,000 jobs, more as the organization grows), on every create. Instead,
triggers on the jobs table keep OrganizationJobCount right whichever way a job comes or
goes: the API, the admin, a crontab import, a bulk insert, a project's or organization's
cascade delete, raw SQL.

The triggers are installed after every ``migrate`` (post_migrate), not by a migration:
SQLite drops a table's triggers when Django rebuilds the table to alter it, so a later
migration of the jobs table would lose them silently. Whenever one is missing, it is
(re)created and every count is taken again from the jobs table, in one transaction.
"""

from django.db import connections, transaction

from apps.sql import rows

from .models import Job, OrganizationJobCount


def job_count(organization_id):
    """How many jobs the organization has (0 before its first)."""
    with rows.prepared_cursor() as cursor:  # read on every create: no ORM query building
        cursor.execute(_COUNT_SQL, [rows.db_value(OrganizationJobCount, "organization", organization_id)])
        row = cursor.fetchone()
    return row[0] if row else 0


_COUNT_SQL = "SELECT jobs FROM jobs_organizationjobcount WHERE organization_id = %s"


def trigger_names(vendor):
    """The count triggers on the jobs table for a database vendor ("postgresql", "sqlite")."""
    return sorted(_VENDORS[vendor]["triggers"])


def ensure_triggers(using="default"):
    """Install whichever count triggers are missing on database ``using``; recount if any were."""
    connection = connections[using]
    vendor = _VENDORS.get(connection.vendor)
    if vendor is None:
        raise NotImplementedError(f"job count triggers for {connection.vendor}")
    tables = set(connection.introspection.table_names())
    if not {Job._meta.db_table, OrganizationJobCount._meta.db_table} <= tables:
        return []  # migrated only part of the way (migrate <app> <migration>)
    with transaction.atomic(using=using), connection.cursor() as cursor:
        for statement in vendor["always"]:
            cursor.execute(statement)
        cursor.execute(vendor["installed"])
        installed = {name for (name,) in cursor.fetchall()}
        missing = [name for name in vendor["triggers"] if name not in installed]
        for name in missing:
            cursor.execute(vendor["triggers"][name])
        if missing:
            _recount(cursor)
    return missing


def _recount(cursor):
    counts, jobs = OrganizationJobCount._meta.db_table, Job._meta.db_table
    cursor.execute(f"DELETE FROM {counts}")
    cursor.execute(f"INSERT INTO {counts} (organization_id, jobs) "
                   f"SELECT organization_id, COUNT(*) FROM {jobs} GROUP BY organization_id")


# PostgreSQL: statement-level triggers over the transition tables, so a bulk insert or a
# cascade delete of many jobs updates each organization's count once, not once per job.
# (A moved job needs a row trigger: transition tables cannot go with a column list.)
_POSTGRESQL = {
    "always": [
        """
        CREATE OR REPLACE FUNCTION jobs_job_count_add() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            INSERT INTO jobs_organizationjobcount (organization_id, jobs)
            SELECT organization_id, COUNT(*) FROM added GROUP BY organization_id
            ON CONFLICT (organization_id) DO UPDATE SET jobs = jobs_organizationjobcount.jobs + EXCLUDED.jobs;
            RETURN NULL;
        END $$
        """,
        """
        CREATE OR REPLACE FUNCTION jobs_job_count_remove() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE jobs_organizationjobcount AS counted SET jobs = counted.jobs - gone.jobs
            FROM (SELECT organization_id, COUNT(*) AS jobs FROM removed GROUP BY organization_id) AS gone
            WHERE counted.organization_id = gone.organization_id;
            RETURN NULL;
        END $$
        """,
        """
        CREATE OR REPLACE FUNCTION jobs_job_count_clear() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM jobs_organizationjobcount;
            RETURN NULL;
        END $$
        """,
        """
        CREATE OR REPLACE FUNCTION jobs_job_count_move() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE jobs_organizationjobcount SET jobs = jobs - 1 WHERE organization_id = OLD.organization_id;
            INSERT INTO jobs_organizationjobcount (organization_id, jobs) VALUES (NEW.organization_id, 1)
            ON CONFLICT (organization_id) DO UPDATE SET jobs = jobs_organizationjobcount.jobs + 1;
            RETURN NULL;
        END $$
        """,
    ],
    "installed": "SELECT tgname FROM pg_trigger WHERE tgrelid = 'jobs_job'::regclass AND NOT tgisinternal",
    "triggers": {
        "jobs_job_count_insert": "CREATE TRIGGER jobs_job_count_insert AFTER INSERT ON jobs_job "
                                 "REFERENCING NEW TABLE AS added FOR EACH STATEMENT "
                                 "EXECUTE FUNCTION jobs_job_count_add()",
        "jobs_job_count_delete": "CREATE TRIGGER jobs_job_count_delete AFTER DELETE ON jobs_job "
                                 "REFERENCING OLD TABLE AS removed FOR EACH STATEMENT "
                                 "EXECUTE FUNCTION jobs_job_count_remove()",
        "jobs_job_count_move": "CREATE TRIGGER jobs_job_count_move AFTER UPDATE OF organization_id ON jobs_job "
                               "FOR EACH ROW WHEN (OLD.organization_id IS DISTINCT FROM NEW.organization_id) "
                               "EXECUTE FUNCTION jobs_job_count_move()",
        # TRUNCATE fires no delete trigger.
        "jobs_job_count_truncate": "CREATE TRIGGER jobs_job_count_truncate AFTER TRUNCATE ON jobs_job "
                                   "FOR EACH STATEMENT EXECUTE FUNCTION jobs_job_count_clear()",
    },
}

_SQLITE_ADD = ("INSERT INTO jobs_organizationjobcount (organization_id, jobs) VALUES (NEW.organization_id, 1) "
               "ON CONFLICT (organization_id) DO UPDATE SET jobs = jobs + 1;")
_SQLITE_REMOVE = "UPDATE jobs_organizationjobcount SET jobs = jobs - 1 WHERE organization_id = OLD.organization_id;"

_SQLITE = {
    "always": [],
    "installed": "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'jobs_job'",
    "triggers": {
        "jobs_job_count_insert": f"CREATE TRIGGER jobs_job_count_insert AFTER INSERT ON jobs_job "
                                 f"BEGIN {_SQLITE_ADD} END",
        "jobs_job_count_delete": f"CREATE TRIGGER jobs_job_count_delete AFTER DELETE ON jobs_job "
                                 f"BEGIN {_SQLITE_REMOVE} END",
        "jobs_job_count_move": f"CREATE TRIGGER jobs_job_count_move AFTER UPDATE OF organization_id ON jobs_job "
                               f"WHEN OLD.organization_id IS NOT NEW.organization_id "
                               f"BEGIN {_SQLITE_REMOVE} {_SQLITE_ADD} END",
    },
}

_VENDORS = {"postgresql": _POSTGRESQL, "sqlite": _SQLITE}
