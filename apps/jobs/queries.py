"""The jobs app's hand-written SQL and the cursors that run it: the version number a change
of a job takes (versions.py), each organization's job count read on every create and the
triggers on the jobs table that keep it (jobcount.py, for PostgreSQL and the embedded
mode's SQLite), and the API's per-request reads of a job, its links, its projects and
the jobs list's pages (api.py, links.py, serializers.py, run by apps.sql.rows). The logic around them stays in
those modules."""

from django.db import connection, connections

from apps.sql import rows
from apps.sql.modes import on_postgresql

from apps.projects.models import Project

from .models import Job, JobDependency, JobDue, OrganizationJobCount

_quote = connection.ops.quote_name
J, C, D = Job._meta.db_table, OrganizationJobCount._meta.db_table, JobDue._meta.db_table

# --- versions (apps.jobs.versions) -------------------------------------------------------

NEXT_VERSION = f"UPDATE {_quote(J)} SET version = version + 1 WHERE id = %s RETURNING version"


def next_version_number(job_id):
    """``version + 1`` in the job's row, which stays locked until the caller's transaction
    commits (a concurrent change waits and takes the number after)."""
    with connection.cursor() as cursor:
        cursor.execute(NEXT_VERSION, [Job._meta.pk.get_db_prep_value(job_id, connection)])
        return cursor.fetchone()[0]


# --- a job's due time (apps.jobs.models.JobDue) ------------------------------------------

# None while the job is disabled, whatever the caller's copy of the job says.
_WRITE_DUE = (f"INSERT INTO {D} (job_id, next_run_at) SELECT id, CASE WHEN enabled THEN {{at}} END FROM {J} "
              "WHERE id = %s ON CONFLICT (job_id) DO UPDATE SET next_run_at = EXCLUDED.next_run_at")


def _due_params(job_id, next_run_at, using):
    return [rows.db_value(JobDue, "next_run_at", next_run_at, using), rows.db_value(Job, "id", job_id, using)]


def _write_due_sql(using):
    return _WRITE_DUE.format(at="%s::timestamptz" if on_postgresql(using) else "%s")


def write_due(job_id, next_run_at, using):
    """Store the job's due time; returns whether one is stored (the job is enabled)."""
    with connections[using].cursor() as cursor:
        cursor.execute(_write_due_sql(using) + " RETURNING next_run_at IS NOT NULL",
                       _due_params(job_id, next_run_at, using))
        row = cursor.fetchone()
    return bool(row and row[0])


def write_dues(due, using):
    """Store many jobs' due times, ``due``: [(job id, due time)], in one round of the same
    statement (a bulk insert of the jobs)."""
    if due:
        with connections[using].cursor() as cursor:
            cursor.executemany(_write_due_sql(using), [_due_params(job_id, at, using) for job_id, at in due])


# --- the API's reads (apps.jobs.api, links, serializers; apps.sql.rows runs them) ---------


# A job's due time (JobDue), read beside its row.
_DUE_JOIN = f'LEFT JOIN "{D}" due ON due."job_id" = j."id"'
_DUE = rows.select_list(JobDue, "due")


def _marks(count):
    return ", ".join(["%s"] * count)


def job_with_links_sql():
    """The job (by id and organization), its due time (JobDue's columns) and each of its
    dependency links with the linked downstream job's name: one row per link, or one row of
    nulls after the job and its due time."""
    job_table, link_table = Job._meta.db_table, JobDependency._meta.db_table
    return (f'SELECT {rows.select_list(Job, "j")}, {rows.select_list(JobDependency, "d")}, {_DUE}, '
            f'dj."name" FROM "{job_table}" j {_DUE_JOIN} '
            f'LEFT JOIN "{link_table}" d ON d."upstream_id" = j."id" OR d."downstream_id" = j."id" '
            f'LEFT JOIN "{job_table}" dj ON dj."id" = d."downstream_id" '
            'WHERE j."id" = %s AND j."organization_id" = %s ORDER BY d."id"')


def links_sql(job_count):
    """The dependency links (with the downstream job's name) of ``job_count`` jobs, whose
    ids are given twice: as upstream, then as downstream."""
    marks = _marks(job_count)
    return (f'SELECT {rows.select_list(JobDependency, "d")}, j."name" '
            f'FROM "{JobDependency._meta.db_table}" d JOIN "{Job._meta.db_table}" j ON j."id" = d."downstream_id" '
            f'WHERE d."upstream_id" IN ({marks}) OR d."downstream_id" IN ({marks}) ORDER BY d."id"')


def _scope(project_count):
    """An organization's jobs (alias ``j``), with ``project_count`` (not None) only those of
    that many project ids, given after the organization."""
    where = 'j."organization_id" = %s'
    if project_count is not None:
        where += f' AND j."project_id" IN ({_marks(project_count)})'
    return where


def job_page_sql(*, project_count):
    """A page of the jobs list as the ORM writes it unfiltered (apps.jobs.api.JOB_HAS_LINKS,
    the viewset's ordering): the jobs in ``_scope`` by name then id, each with its due time
    (JobDue's columns) and whether it has any dependency link; LIMIT and OFFSET given last."""
    link_table = JobDependency._meta.db_table
    return (f'SELECT {rows.select_list(Job, "j")}, {_DUE}, EXISTS (SELECT 1 FROM "{link_table}" d '
            'WHERE d."upstream_id" = j."id" OR d."downstream_id" = j."id") '
            f'FROM "{Job._meta.db_table}" j {_DUE_JOIN} WHERE {_scope(project_count)} '
            'ORDER BY j."name", j."id" LIMIT %s OFFSET %s')


def job_total_sql(*, project_count):
    """How many jobs are in ``_scope``."""
    return f'SELECT COUNT(*) FROM "{Job._meta.db_table}" j WHERE {_scope(project_count)}'


PROJECT_OF_ORGANIZATION = (f'SELECT {rows.select_list(Project, "p")} FROM "{Project._meta.db_table}" p '
                           'WHERE p."id" = %s AND p."organization_id" = %s')


def projects_sql(*, project_count, limit):
    """Up to ``limit`` of an organization's projects by name; with ``project_count`` (not
    None) only those of that many ids, given after the organization."""
    where = 'p."organization_id" = %s'
    if project_count is not None:
        where += f' AND p."id" IN ({_marks(project_count)})'
    return (f'SELECT {rows.select_list(Project, "p")} FROM "{Project._meta.db_table}" p '
            f'WHERE {where} ORDER BY p."name", p."id" LIMIT {int(limit)}')


# --- the job count (apps.jobs.jobcount) --------------------------------------------------

COUNT_JOBS = "SELECT jobs FROM jobs_organizationjobcount WHERE organization_id = %s"


def job_count(organization_id):
    """How many jobs the organization has (0 before its first)."""
    with rows.prepared_cursor() as cursor:  # read on every create: no ORM query building
        cursor.execute(COUNT_JOBS, [rows.db_value(OrganizationJobCount, "organization", organization_id)])
        row = cursor.fetchone()
    return row[0] if row else 0


CLEAR_COUNTS = f"DELETE FROM {C}"
RECOUNT = (f"INSERT INTO {C} (organization_id, jobs) "
           f"SELECT organization_id, COUNT(*) FROM {J} GROUP BY organization_id")

# A disabled job has no due time (JobDue), whatever disabled it: a pause, the worker's
# auto-disable (apps.executions.queries.UPDATE_JOB_HEALTH), an organization's deletion, the
# admin. The scheduler's due index then holds enabled jobs only, and a paused job's stale time
# never fires: every re-enable sets the due time again (apps.jobs.services.resume_job).
DUE_TRIGGER = "jobs_job_disabled"
_DISABLED = "OLD.enabled AND NOT NEW.enabled"
_CLEAR_DUE = f"UPDATE {D} SET next_run_at = NULL WHERE job_id = NEW.id;"
CLEAR_DISABLED_DUE = (f"UPDATE {D} SET next_run_at = NULL WHERE next_run_at IS NOT NULL "
                      f"AND job_id IN (SELECT id FROM {J} WHERE NOT enabled)")

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
        f"""
        CREATE OR REPLACE FUNCTION jobs_job_due_clear() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            {_CLEAR_DUE}
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
        DUE_TRIGGER: f"CREATE TRIGGER {DUE_TRIGGER} AFTER UPDATE OF enabled ON jobs_job "
                     f"FOR EACH ROW WHEN ({_DISABLED}) EXECUTE FUNCTION jobs_job_due_clear()",
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
        DUE_TRIGGER: f"CREATE TRIGGER {DUE_TRIGGER} AFTER UPDATE OF enabled ON jobs_job "
                     f"WHEN {_DISABLED} BEGIN {_CLEAR_DUE} END",
    },
}

def count_triggers(using):
    """Database ``using``'s statements: those run on every install ("always"), the one listing
    the triggers in place ("installed") and each count trigger's CREATE ("triggers")."""
    return _POSTGRESQL if on_postgresql(using) else _SQLITE


def install_count_triggers(using, *, with_due=True):
    """Create whichever triggers database ``using`` lacks (after the statements run every
    time) and, when any count trigger was, take every count again from the jobs table (when
    the due trigger was, clear the disabled jobs' due times); returns their names. In one
    transaction the caller holds. ``with_due``: the due trigger too (its table exists)."""
    statements = count_triggers(using)
    with connections[using].cursor() as cursor:
        for statement in statements["always"]:
            cursor.execute(statement)
        cursor.execute(statements["installed"])
        installed = {name for (name,) in cursor.fetchall()}
        missing = [name for name in statements["triggers"]
                   if name not in installed and (with_due or name != DUE_TRIGGER)]
        for name in missing:
            cursor.execute(statements["triggers"][name])
        if set(missing) - {DUE_TRIGGER}:
            cursor.execute(CLEAR_COUNTS)
            cursor.execute(RECOUNT)
        if DUE_TRIGGER in missing:
            cursor.execute(CLEAR_DISABLED_DUE)
    return missing
