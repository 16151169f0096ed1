"""The executions app's hand-written SQL (PostgreSQL): the set-based statements that record
finished runs and advance claimed jobs, each over binary arrays built from one column list
(apps.sql.bulk.Unnest). The logic around them is in recording.py and scheduler.py."""

from django.db import connection

from apps.eventstream import outbox
from apps.jobs.models import Job
from apps.sql.bulk import Unnest

from .models import Attempt, Execution

S = Execution.Status
_quote = connection.ops.quote_name

# --- recording ---------------------------------------------------------------------------

#: An execution's new state per finished run, in the order Result rows give them.
FINISHED = Unnest([
    ("id", "uuid"), ("status", "text"), ("attempt", "smallint"), ("duration_ms", "integer"),
    ("response_status", "smallint"), ("response_headers", "jsonb"), ("response_body", "text"),
    ("remote_addr", "text"), ("error_kind", "text"), ("error_message", "text"),
    ("next_attempt_at", "timestamptz"), ("finished_at", "timestamptz"),
])

_FINISH = (
    f"UPDATE {_quote(Execution._meta.db_table)} AS e SET status = v.status, attempt = v.attempt, "
    "duration_ms = v.duration_ms, response_status = v.response_status, response_headers = v.response_headers, "
    "response_body = v.response_body, remote_addr = v.remote_addr, error_kind = v.error_kind, "
    "error_message = v.error_message, lease_expires_at = NULL, next_attempt_at = v.next_attempt_at, "
    # a retry waits for the scheduler to publish it when next_attempt_at comes
    f"published_at = CASE WHEN v.status = '{S.QUEUED}' THEN NULL ELSE e.published_at END, "
    f"finished_at = CASE WHEN v.status = '{S.QUEUED}' THEN e.finished_at ELSE v.finished_at END "
    f"FROM {FINISHED.source} "
    f"WHERE e.id = v.id AND e.status = '{S.RUNNING}'"
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
                f"ev AS ({outbox.insert_sql(_OUTCOME_EVENTS)}) SELECT id FROM upd")
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
#: A run whose lease was lost may meet the attempt of the worker that took it over under
#: the same number: that one stays; returns the executions whose row was stored.
INSERT_ATTEMPTS_OF_LOST_LEASES = (f"{INSERT_ATTEMPTS} ON CONFLICT (execution_id, number) DO NOTHING "
                                  "RETURNING execution_id")

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

# --- scheduling --------------------------------------------------------------------------

#: Each claimed job's next due time (and when it expired, if it did).
ADVANCED = Unnest([("id", "uuid"), ("next_run_at", "timestamptz"), ("expired_at", "timestamptz")])
ADVANCE_JOBS = (
    f"UPDATE {_quote(Job._meta.db_table)} AS j SET next_run_at = v.next_run_at, "
    "expired_at = COALESCE(v.expired_at, j.expired_at) "
    f"FROM {ADVANCED.source} WHERE j.id = v.id"
)
