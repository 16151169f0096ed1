"""The executions app's hand-written SQL (PostgreSQL) and the cursors that run it: the
set-based statements that record finished runs (recording.py), insert scheduled runs and
advance claimed jobs (scheduler.py), each over binary arrays built from one column list
(apps.sql.bulk.Unnest), the purge's array deletes (purging.py) and the API's unfiltered
history pages (history/api.py). The logic around them,
and the ORM paths of the embedded mode's SQLite, stay in those modules."""

from functools import cache

import orjson
import psycopg
from django.db import connection, models, transaction
from psycopg.types.json import Jsonb

from apps.eventstream import outbox
from apps.eventstream import queries as event_queries
from apps.jobs.models import Job, JobDue, OrganizationJobCount
from apps.sql.bulk import Unnest, binding_cursor
from apps.sql.planning import checked_per_row, reach_rows_by_key
from apps.sql.rows import fetch_all, select_list

from .models import Attempt, DeletedJob, Execution

S = Execution.Status
_quote = connection.ops.quote_name

# --- recording ---------------------------------------------------------------------------

#: An execution's new state per finished run, in the order Result rows give them; the
#: worker's lease token, which the row must still carry (the fencing rule), and the delay
#: of a retry, counted from the database's clock.
FINISHED = Unnest([
    ("id", "uuid"), ("lease_token", "bigint"), ("status", "text"), ("attempt", "smallint"),
    ("duration_ms", "integer"), ("response_status", "smallint"), ("response_headers", "jsonb"),
    ("response_body", "text"), ("remote_addr", "text"), ("error_kind", "text"), ("error_message", "text"),
    ("retry_in", "float8"), ("finished_at", "timestamptz"),
])

_RUNNING = f"e.status = '{S.RUNNING}'"


def held(token):
    """The fencing rule in SQL: a worker writes for a run only while the row is ``running`` and
    carries the token of the worker's claim (docs/architecture.md, "Fenced leases"), ``token``
    (SQL)."""
    return f"{_RUNNING} AND e.lease_token = {token}"


HELD = held("v.lease_token")

_FINISH = (
    f"UPDATE {_quote(Execution._meta.db_table)} AS e SET status = v.status, attempt = v.attempt, "
    "duration_ms = v.duration_ms, response_status = v.response_status, response_headers = v.response_headers, "
    "response_body = v.response_body, remote_addr = v.remote_addr, error_kind = v.error_kind, "
    "error_message = v.error_message, lease_expires_at = NULL, "
    "next_attempt_at = statement_timestamp() + make_interval(secs => v.retry_in), "  # the database's clock; NULL: none
    # a retry waits for the scheduler to publish it when next_attempt_at comes
    f"published_at = CASE WHEN v.status = '{S.QUEUED}' THEN NULL ELSE e.published_at END, "
    f"finished_at = CASE WHEN v.status = '{S.QUEUED}' THEN e.finished_at ELSE v.finished_at END "
    f"FROM {FINISHED.source} "
    # The ids twice: as the join's key and as the rows' own (``id = ANY``), so that however
    # PostgreSQL joins them it reaches the rows by their key (apps.sql.planning).
    f"WHERE e.id = ANY(%b::uuid[]) AND e.id = v.id AND {checked_per_row(HELD)}"
)

_OUTCOME_EVENTS = (
    f"SELECT 'execution', u.status, '{S.RUNNING}', u.organization_id, j.project_id, u.job_id, u.id, u.attempt, "
    f"CASE WHEN u.status = '{S.QUEUED}' THEN 'retry' ELSE '' END, jsonb_strip_nulls(jsonb_build_object("
    f"'scheduled_for', {outbox.utc_sql('u.scheduled_for')}, 'trigger', u.trigger, "
    "'error_kind', NULLIF(u.error_kind, ''), 'response_status', u.response_status, 'duration_ms', u.duration_ms, "
    f"'next_attempt_at', {outbox.utc_sql('u.next_attempt_at')})), "
    "u.changed_at "
    f"FROM upd u LEFT JOIN {Job._meta.db_table} j ON j.id = u.job_id"
)


def finish_sql(with_events):
    """The executions' update (only those still ``running``), returning the ids moved on;
    with the event stream on, the same statement writes each moved run's event."""
    if with_events:
        return (f"WITH upd AS ({_FINISH} RETURNING e.*, v.finished_at AS changed_at), "
                f"ev AS ({event_queries.insert_sql(_OUTCOME_EVENTS)}) SELECT id FROM upd")
    return f"{_FINISH} RETURNING e.id"


#: An Attempt row per finished run: the columns, in the order AttemptValues rows give them.
ATTEMPTS = Unnest([
    ("execution_id", "uuid"), ("number", "smallint"), ("started_at", "timestamptz"),
    ("finished_at", "timestamptz"), ("duration_ms", "integer"), ("request_method", "text"),
    ("request_url", "text"), ("request_headers", "jsonb"), ("request_body", "text"),
    ("response_status", "smallint"), ("response_headers", "jsonb"), ("response_body", "text"),
    ("remote_addr", "text"), ("outcome", "text"), ("error_kind", "text"), ("error_message", "text"),
])

INSERT_ATTEMPTS = (f"INSERT INTO {_quote(Attempt._meta.db_table)} ({', '.join(ATTEMPTS.names)}) "
                   f"{ATTEMPTS.select}")

#: The attempts of runs a worker did not move on (their row no longer ``running`` with its
#: token), with the token of the worker's claim. Still the run's token (a cancel moved it
#: while its request was in flight): the run's own attempt. Another token (the run was
#: taken back): a superseded attempt, kept under the worker's token. The run gone (its job
#: deleted meanwhile): nothing, instead of a foreign-key error that would fail the group.
#: Returns (execution id, superseded token) of the rows stored.
UNMOVED_ATTEMPTS = Unnest([*ATTEMPTS.columns, ("lease_token", "bigint")])
INSERT_UNMOVED_ATTEMPTS = (
    f"INSERT INTO {_quote(Attempt._meta.db_table)} ({', '.join(ATTEMPTS.names)}, superseded_token) "
    f"SELECT {', '.join('v.' + name for name in ATTEMPTS.names)}, "
    "CASE WHEN e.lease_token = v.lease_token THEN 0 ELSE v.lease_token END "
    f"FROM {UNMOVED_ATTEMPTS.source} JOIN {_quote(Execution._meta.db_table)} e ON e.id = v.execution_id "
    "ON CONFLICT (execution_id, number, superseded_token) DO NOTHING RETURNING execution_id, superseded_token"
)

#: Per job, its runs' HealthDelta (cronsvc.jobhealth) and what the last one says.
JOB_HEALTH = Unnest([
    ("id", "uuid"), ("ran_at", "timestamptz"), ("status", "text"), ("reset", "bool"), ("head", "integer"),
    ("tail", "integer"), ("disable", "bool"), ("threshold", "integer"), ("reason", "text"),
])

# HealthDelta.failures and HealthDelta.disables, in SQL, on the stored count
_DISABLING = ("j.enabled AND v.threshold > 0 "  # 0: the plan never disables jobs
              "AND (v.disable OR (v.head > 0 AND j.consecutive_failures + v.head >= v.threshold))")
UPDATE_JOB_HEALTH = (
    f"UPDATE {_quote(Job._meta.db_table)} AS j SET last_run_at = v.ran_at, last_status = v.status, "
    "consecutive_failures = CASE WHEN v.reset THEN v.tail ELSE j.consecutive_failures + v.head END, "
    f"enabled = CASE WHEN {_DISABLING} THEN false ELSE j.enabled END, "
    f"disabled_reason = CASE WHEN {_DISABLING} THEN v.reason ELSE j.disabled_reason END "
    f"FROM {JOB_HEALTH.source} WHERE j.id = v.id"
)

# --- claiming (delivery.py) ---------------------------------------------------------------

#: The columns a claim returns per run: the execution's own, then its job's stamp
#: (apps.executions.worker.jobcache) as ``job_stamp_version`` and ``job_stamp_updated_at``.
CLAIMED_COLUMNS = tuple(  # in the model's field order, as Model.from_db takes them
    field.attname for field in Execution._meta.concrete_fields
    if field.attname in {"id", "job_id", "organization_id", "scheduled_for", "attempt", "trigger", "upstream_executions",
                         "lease_token"})
_EXEC = _quote(Execution._meta.db_table)

#: The database's clock as a statement reads it: the statement's start (``now()`` would be
#: its transaction's, older inside a long one).
DB_NOW = "statement_timestamp()"

#: Queued runs among the ids that are due by the database's clock, locked without waiting
#: for a row another worker holds, moved to running under a new lease token with a lease
#: of LEASE_SECONDS from the database's clock (renewed by the worker's heartbeat), returned
#: with that clock's time; in the same statement, the runs among the ids not due yet by
#: that clock (a publisher whose clock runs ahead) are handed back to be published when
#: they come due (sweeper.due_retries), not sent early.
CLAIM = (
    f"WITH early AS (UPDATE {_EXEC} SET published_at = NULL, "
    "next_attempt_at = GREATEST(scheduled_for, COALESCE(next_attempt_at, scheduled_for)) "
    f"WHERE id IN (SELECT id FROM {_EXEC} WHERE id = ANY(%b::uuid[]) AND " + checked_per_row(
        f"status = '{S.QUEUED}' AND (scheduled_for > {DB_NOW} OR next_attempt_at > {DB_NOW})")
    + " FOR UPDATE SKIP LOCKED) RETURNING id), "
    f"c AS (SELECT id FROM {_EXEC} WHERE id = ANY(%b::uuid[]) AND " + checked_per_row(
        f"status = '{S.QUEUED}' AND scheduled_for <= {DB_NOW} "
        f"AND (next_attempt_at IS NULL OR next_attempt_at <= {DB_NOW})")
    + " FOR UPDATE SKIP LOCKED) "
    f"UPDATE {_EXEC} AS e SET status = '{S.RUNNING}', started_at = {DB_NOW}, lease_token = e.lease_token + 1, "
    f"lease_expires_at = {DB_NOW} + make_interval(secs => %b) "
    f"FROM c, {_quote(Job._meta.db_table)} AS j WHERE e.id = c.id AND j.id = e.job_id "
    f"RETURNING {', '.join('e.' + name for name in CLAIMED_COLUMNS)}, j.version, j.updated_at, {DB_NOW}"
)


def claim_queued(ids, *, lease_seconds):
    """Rows of CLAIMED_COLUMNS + (job version, job updated_at, the database's now) for the
    runs claimed."""
    ids = list(ids)
    with binding_cursor() as cursor:
        cursor.execute(CLAIM, [ids, ids, float(lease_seconds)], binary=True)
        return cursor.fetchall()


#: The heartbeat: the leases a worker process still holds (id, token), renewed from the
#: database's clock in one statement; returns the ids renewed (a run missing from them was
#: taken back, cancelled or deleted: its worker no longer holds it). A process may hold
#: thousands, so nothing here is a join whose plan PostgreSQL could get wrong (a nested loop
#: over both lists grows as their product: bench/README.md, "Figures behind the code"): the
#: rows are reached by their ids, each one's token is looked up in a jsonb object keyed by id
#: (a binary search), and the update takes the locked rows' ids as one array.
RENEW_LEASES = (
    # the rows locked in id order, as the recording's: two statements never wait on each other in a cycle
    f"WITH h AS (SELECT e.id FROM {_EXEC} AS e WHERE e.id = ANY(%b::uuid[]) AND "
    f"{checked_per_row(held('(%b ->> e.id::text)::bigint'))} ORDER BY e.id FOR UPDATE OF e) "
    f"UPDATE {_EXEC} AS e SET lease_expires_at = {DB_NOW} + make_interval(secs => %b) "
    f"WHERE e.id = ANY(ARRAY(SELECT id FROM h)) AND {checked_per_row(_RUNNING)} RETURNING e.id"
)
HELD_IDS = Unnest([("id", "uuid")])


def held_tokens(leases):
    """The tokens of ``leases`` ([(id, token)]) as RENEW_LEASES takes them: a jsonb parameter
    (not text cast in SQL: under a generic plan the cast would parse it again for every row)."""
    return Jsonb({str(execution_id): token for execution_id, token in leases}, dumps=orjson.dumps)


def database_now():
    with binding_cursor() as cursor:
        cursor.execute(f"SELECT {DB_NOW}")
        return cursor.fetchone()[0]


def renew_leases(leases, lease_seconds):
    """Renew the ``leases`` ([(id, token)]); return the ids renewed."""
    (ids,) = HELD_IDS.params((execution_id,) for execution_id, _ in leases)
    with transaction.atomic():
        reach_rows_by_key()
        return _returned_ids(RENEW_LEASES, [ids, held_tokens(leases), float(lease_seconds)])


@cache
def _owners_sql():
    from apps.accounts.models import Organization
    from apps.projects.models import Project

    plan = Organization._meta.get_field("plan")
    plan_model = plan.related_model
    projects = (f"SELECT {select_list(Project, 'p')} FROM {_quote(Project._meta.db_table)} p "
                "WHERE p.id = ANY(%s)")
    organizations = (
        f"SELECT {select_list(Organization, 'o')}, {select_list(plan_model, 'pl')} "
        f"FROM {_quote(Organization._meta.db_table)} o JOIN {_quote(plan_model._meta.db_table)} pl "
        f"ON pl.{_quote(plan.target_field.column)} = o.{_quote(plan.column)} WHERE o.id = ANY(%s)")
    return Project, projects, Organization, plan_model, organizations


def owners(project_ids, organization_ids):
    """The claimed runs' projects and organizations (each with its plan loaded):
    ({id: Project}, {id: Organization}), in two statements of one array each (the ORM's
    ``in_bulk`` cost a worker more CPU per batch to build the same: bench/README.md, "Figures
    behind the code")."""
    project_model, projects_sql, organization_model, plan_model, organizations_sql = _owners_sql()
    projects = {project.id: project for (project,) in fetch_all(projects_sql, [list(project_ids)], project_model)}
    organizations = {}
    for organization, plan in fetch_all(organizations_sql, [list(organization_ids)], organization_model, plan_model):
        organization.plan = plan
        organizations[organization.id] = organization
    return projects, organizations


# --- scheduling --------------------------------------------------------------------------

#: Each claimed job's next due time (its narrow row, apps.jobs.models.JobDue) and, for the few
#: that expired, when: only those jobs' own rows are written.
ADVANCED = Unnest([("id", "uuid"), ("next_run_at", "timestamptz")])
EXPIRED = Unnest([("id", "uuid"), ("expired_at", "timestamptz")], alias="x")
ADVANCE_JOBS = (
    f"adv AS (UPDATE {_quote(JobDue._meta.db_table)} AS d SET next_run_at = v.next_run_at "
    f"FROM {ADVANCED.source} WHERE d.job_id = v.id), "
    f"exp AS (UPDATE {_quote(Job._meta.db_table)} AS j SET expired_at = x.expired_at "
    f"FROM {EXPIRED.source} WHERE j.id = x.id)"
)


def advance_params(advanced):
    """ADVANCE_JOBS's parameters from ``advanced``: (job id, next due time, expired at or None)."""
    return [*ADVANCED.params((job_id, next_at) for job_id, next_at, _ in advanced),
            *EXPIRED.params((job_id, expired_at) for job_id, _, expired_at in advanced if expired_at is not None)]


# --- running the scheduler's statements (apps.executions.scheduling.tick) -----------------------

_SCHEDULE = Execution.Trigger.SCHEDULE.value


def fetch_binary(sql, params):
    """The rows of an ORM statement as tuples, read on a binary cursor (psycopg decodes
    timestamps and uuids in C). Django's error wrapper, as its own cursors have: a lost
    session raises Django's OperationalError and marks the connection broken."""
    with binding_cursor() as cursor:
        cursor.execute(sql, params, binary=True)
        return cursor.fetchall()


def begin_claim(idle_milliseconds):
    """For the rest of this transaction (a scheduler's claim): PostgreSQL ends the session
    if it idles longer than ``idle_milliseconds``, and reaches the claimed jobs by their
    keys (apps.sql.planning). One round trip."""
    reach_rows_by_key(idle_in_transaction_session_timeout=int(idle_milliseconds))


class ScheduledRunsInsert:
    """A claim's writes in one statement (one round trip): ``WITH adv AS (UPDATE jobdue ...
    FROM unnest(<ADVANCED's arrays>)), exp AS (UPDATE jobs ... <EXPIRED's>), ins AS (INSERT
    INTO executions SELECT ... FROM unnest(<one binary array per varying column>) RETURNING
    id) SELECT id FROM ins``. The parts write different tables (no foreign key joins them in
    the database), so one statement does what separate ones did. Built once per process
    from the model: every column the scheduler does not set gets the field's default, as
    with bulk_create, so a field added to Execution later needs no change here (unless its
    default must differ per row, like an id). The varying columns are ``id`` and the
    scheduler's row fields, in their order.

    The plain insert refuses a batch with an occurrence that already has its row
    (``UNIQUE_VIOLATION``); ``careful`` inserts with ``ON CONFLICT DO NOTHING``, which
    skips such rows. A tick sends the plain one and, refused, claims again carefully:
    PostgreSQL's speculative insertion, which ON CONFLICT needs, costs on every row
    (bench/README.md, "Figures behind the code"), and such an occurrence is rare."""

    _instance = None

    @classmethod
    def get(cls, row_fields):
        if cls._instance is None:
            cls._instance = cls(row_fields)
        return cls._instance

    def __init__(self, row_fields):
        fields = Execution._meta.concrete_fields
        by_column = {f.column: f for f in fields}
        self.varying = ["id", *row_fields]
        columns, select, self.constants = [], [], []
        for f in fields:
            columns.append(_quote(f.column))
            if f.column in self.varying:
                select.append(f"v.{_quote(f.column)}")
                continue
            if f.column == "trigger":
                value = _SCHEDULE
            elif f.column == "created_at":
                value = None  # the tick's ``now``, set per call
            else:
                value = f.get_db_prep_save(f.get_default(), connection)
            select.append(f"%b::{f.db_type(connection)}")
            self.constants.append((f.column, value))
        self.rows = Unnest([(column, by_column[column].db_type(connection)) for column in self.varying])
        insert = (f"INSERT INTO {_quote(Execution._meta.db_table)} ({', '.join(columns)}) "
                  f"SELECT {', '.join(select)} FROM {self.rows.source}")
        # {(careful, with events): statement}. With the event stream on, the same statement
        # writes each inserted run's event (queued or skipped) to the outbox from its rows.
        self.sql = {}
        for careful, conflicts in ((False, ""), (True, " ON CONFLICT DO NOTHING")):
            self.sql[careful, False] = (f"WITH {ADVANCE_JOBS}, "
                                        f"ins AS ({insert}{conflicts} RETURNING id) SELECT id FROM ins")
            self.sql[careful, True] = (
                f"WITH {ADVANCE_JOBS}, "
                f"ins AS ({insert}{conflicts} RETURNING id, job_id, organization_id, status, skip_reason, "
                f"scheduled_for), ev AS ({event_queries.insert_sql(_SCHEDULED_EVENTS)}) SELECT id FROM ins"
            )

    def run(self, ids, rows, now, advanced, *, careful):
        """Insert ``rows`` (with ``ids``) and advance the jobs ``advanced`` ((id, next due
        time, expired at) each); returns the ids inserted. Not ``careful``: an occurrence
        that already has its row raises a unique violation (the statement does nothing)."""
        constants = [now if column == "created_at" else value for column, value in self.constants]
        arrays = self.rows.params((execution_id, *row) for execution_id, row in zip(ids, rows))
        params = [*advance_params(advanced), *constants, *arrays]
        with_events = outbox.enabled()
        if with_events:
            params.append(now)
        return _returned_ids(self.sql[careful, with_events], params)


def sqlstate(exc):
    """PostgreSQL's SQLSTATE of ``exc`` (Django's error or psycopg's), or None."""
    while exc is not None:
        state = getattr(exc, "sqlstate", None)
        if state:
            return state
        exc = exc.__cause__
    return None


#: PostgreSQL refusing a duplicate key.
UNIQUE_VIOLATION = psycopg.errors.UniqueViolation.sqlstate


_SCHEDULED_EVENTS = (
    "SELECT 'execution', i.status, '', i.organization_id, j.project_id, i.job_id, i.id, 0, i.skip_reason, "
    f"jsonb_build_object('scheduled_for', {outbox.utc_sql('i.scheduled_for')}, 'trigger', '{_SCHEDULE}'), "
    f"%b::timestamptz FROM ins i LEFT JOIN {Job._meta.db_table} j ON j.id = i.job_id"
)


# --- running the recording statements (apps.executions.worker.recording) --------------------------


def _returned_ids(sql, params):
    with binding_cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0] for row in cursor.fetchall()}


def finish_executions(params, *, with_events):
    """Move each run of ``params`` (FINISHED) on; returns the ids of those that moved. Call it
    in a transaction kept on keys (apps.sql.planning.reach_rows_by_key)."""
    return _returned_ids(finish_sql(with_events=with_events), [*params, params[0]])


def insert_attempts(params):
    with binding_cursor() as cursor:
        cursor.execute(INSERT_ATTEMPTS, params)


def insert_unmoved_attempts(params):
    """INSERT_UNMOVED_ATTEMPTS: returns {execution id: superseded token} of the rows stored."""
    with binding_cursor() as cursor:
        cursor.execute(INSERT_UNMOVED_ATTEMPTS, params)
        return dict(cursor.fetchall())


def update_jobs_health(params):
    with binding_cursor() as cursor:
        cursor.execute(UPDATE_JOB_HEALTH, params)


# --- purging -----------------------------------------------------------------------------


def delete_executions(ids, links):
    """Delete the executions ``ids`` and what ``links`` ((model, field, on_delete) of each
    foreign key to them) says hangs off them: CASCADE rows go, SET_NULL links are cut, then
    the runs; returns how many runs. One array parameter per statement (binary,
    server-side binding) instead of 5,000 literals. The caller holds the transaction."""
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:
        # The runs locked first (in id order): a worker recording one of them meanwhile waits,
        # then finds it gone, instead of adding an attempt between the attempts' delete and
        # the runs' (a foreign-key violation that failed the whole delete).
        cursor.execute(f'SELECT 1 FROM "{Execution._meta.db_table}" WHERE id = ANY(%s) ORDER BY id FOR UPDATE', [ids])
        for model, field, on_delete in links:
            table, column = model._meta.db_table, field.column
            if on_delete is models.CASCADE:
                cursor.execute(f'DELETE FROM "{table}" WHERE "{column}" = ANY(%s)', [ids])
            elif on_delete is models.SET_NULL:
                cursor.execute(f'UPDATE "{table}" SET "{column}" = NULL WHERE "{column}" = ANY(%s)', [ids])
        cursor.execute(f'DELETE FROM "{Execution._meta.db_table}" WHERE id = ANY(%s)', [ids])
        return cursor.rowcount


# --- the history's pages (history/api.py, history/job_api.py) ----------------------------


def _first_start_sql(alias):
    """``first_started_at`` of the run ``alias`` (lateness.with_first_start, in SQL)."""
    attempt = _quote(Attempt._meta.db_table)
    return (f"CASE WHEN {alias}.attempt = 0 THEN {alias}.started_at ELSE "
            f"(SELECT a.started_at FROM {attempt} a WHERE a.execution_id = {alias}.id AND a.number = 1 "
            f"ORDER BY a.started_at LIMIT 1) END")


def history_page_sql(*, job, project_count, position, reverse):
    """A page of an organization's history as the ORM writes it unfiltered: its runs but those
    of its deleted jobs still being purged (``Execution.objects.for_organization``), with
    ``job`` one job's, with ``project_count`` (not None) only those of that many projects'
    jobs, with ``position`` only those before it (after it, ``reverse``), newest first (oldest,
    ``reverse``: the cursor pagination's ordering), each with ``first_started_at``
    (lateness.with_first_start). Parameters: the organization twice, then the job, the project
    ids and the position as asked, then LIMIT and OFFSET. Read newest first along the
    organization's index (exec_org_latest), it keeps only the runs of the projects asked:
    history_page_per_job_sql for projects of few jobs."""
    execution = _quote(Execution._meta.db_table)
    deleted, jobs = _quote(DeletedJob._meta.db_table), _quote(Job._meta.db_table)
    direction = "ASC" if reverse else "DESC"
    sql = f"SELECT {select_list(Execution, 'e')}, {_first_start_sql('e')} FROM {execution} e "
    if project_count is not None:
        sql += f"JOIN {jobs} j ON j.id = e.job_id "
    sql += (f"WHERE e.organization_id = %s AND NOT (e.job_id IN "
            f"(SELECT g.job_id FROM {deleted} g WHERE g.organization_id = %s))")
    if job:
        sql += " AND e.job_id = %s"
    if project_count is not None:
        sql += f" AND j.project_id IN ({', '.join(['%s'] * project_count)})"
    if position:
        sql += f" AND e.scheduled_for {'>' if reverse else '<'} %s"
    return sql + f" ORDER BY e.scheduled_for {direction}, e.id {direction} LIMIT %s OFFSET %s"


def history_page_per_job_sql(*, project_count, position, reverse):
    """The page history_page_sql answers for ``project_count`` projects (the same rows in the
    same order), read job by job: per job of the projects (but a deleted one), its newest
    LIMIT + OFFSET runs before the position (oldest after it, ``reverse``) along the job's
    index (execution_unique_occurrence), then the page among them. The organization's index
    reads the other projects' runs too and drops them (a thousand for each run kept, for a
    project of one job among an organization's thousand); this reads at most LIMIT + OFFSET
    runs per job, whatever share of the organization's runs the projects hold.
    ``first_started_at`` is read for the page's runs only. Parameters: the organization, the
    position if asked, LIMIT + OFFSET, the project ids, the organization, LIMIT, OFFSET."""
    execution = _quote(Execution._meta.db_table)
    deleted, jobs = _quote(DeletedJob._meta.db_table), _quote(Job._meta.db_table)
    direction = "ASC" if reverse else "DESC"

    def order(alias):
        return f"{alias}.scheduled_for {direction}, {alias}.id {direction}"

    before = f" AND e.scheduled_for {'>' if reverse else '<'} %s" if position else ""
    runs = (f"SELECT {select_list(Execution, 'e')} FROM {execution} e WHERE e.job_id = j.id AND e.organization_id = %s"
            f"{before} ORDER BY {order('e')} LIMIT %s")
    page = (f"SELECT e.* FROM {jobs} j CROSS JOIN LATERAL ({runs}) e "
            f"WHERE j.project_id IN ({', '.join(['%s'] * project_count)}) AND NOT (j.id IN "
            f"(SELECT g.job_id FROM {deleted} g WHERE g.organization_id = %s)) ORDER BY {order('e')} LIMIT %s OFFSET %s")
    return f"SELECT {select_list(Execution, 'p')}, {_first_start_sql('p')} FROM ({page}) p ORDER BY {order('p')}"


def project_jobs_sql(project_count):
    """The organization's job count (OrganizationJobCount, NULL before its first job) and how
    many jobs ``project_count`` projects hold, counted up to a cap. Parameters: the
    organization, the project ids, the cap."""
    counts, jobs = _quote(OrganizationJobCount._meta.db_table), _quote(Job._meta.db_table)
    return (f"SELECT (SELECT c.jobs FROM {counts} c WHERE c.organization_id = %s), (SELECT COUNT(*) FROM "
            f"(SELECT 1 FROM {jobs} j WHERE j.project_id IN ({', '.join(['%s'] * project_count)}) LIMIT %s) n)")
