"""The notifications app's hand-written SQL: the periodic watch's marks of the runs it has
alerted about (watch.py), and which finished runs' jobs anyone listens to (alerts.py)."""

from django.db import connection
from django.utils import timezone

from apps.sql.modes import on_postgresql

from .models import AlertState, Channel, EventSubscription, RunAlert

MARK_RUN_ALERT = (f"INSERT INTO {connection.ops.quote_name(RunAlert._meta.db_table)} "
                  f"(execution_id, kind, created_at) VALUES (%s, %s, %s) "
                  f"ON CONFLICT (execution_id, kind) DO NOTHING RETURNING id")
_EXECUTION_ID = RunAlert._meta.get_field("execution_id")  # a uuid as the database takes it (SQLite: hex)


def mark_run_alerts(keys):
    """Those (kind, execution_id) of ``keys`` not alerted about before, marked now (a
    RunAlert each), in the caller's transaction: one INSERT per key."""
    if not keys:
        return set()
    fresh = set()
    with connection.cursor() as cursor:
        for kind, execution_id in keys:
            cursor.execute(MARK_RUN_ALERT, [_EXECUTION_ID.get_db_prep_value(execution_id, connection), kind,
                                            timezone.now()])
            if cursor.fetchone():
                fresh.add((kind, execution_id))
    return fresh


def _listening_sql(owners_hear):
    from apps.jobs.models import Job

    quote = connection.ops.quote_name
    sql = (f"SELECT j.id FROM {quote(Job._meta.db_table)} j WHERE j.id = ANY(%s) "
           f"AND (EXISTS (SELECT 1 FROM {quote(Channel._meta.db_table)} c WHERE c.project_id = j.project_id "
           "AND c.enabled) "
           f"OR EXISTS (SELECT 1 FROM {quote(EventSubscription._meta.db_table)} s WHERE s.project_id = j.project_id "
           "AND s.enabled)")
    if owners_hear:
        sql += (f" OR j.id = ANY(%s) OR EXISTS (SELECT 1 FROM {quote(AlertState._meta.db_table)} a "
                "WHERE a.job_id = j.id AND a.failure_notified)")
    return sql + ")"


def listening_job_ids(job_ids, failing=None):
    """Those of ``job_ids`` whose project has an enabled channel or event subscription;
    with ``failing`` (the owners hear failures of jobs without a channel: dispatch.py) also
    those of ``failing`` and those whose failure was notified and is still open (their
    recovery closes the episode). Called for every group of finished runs: on PostgreSQL one
    array parameter each (Django's ``id__in`` of a hundred uuids was costly for the workers
    to build: bench/README.md, "Figures behind the code")."""
    from django.db.models import Exists, OuterRef, Q

    from apps.jobs.models import Job

    job_ids = list(job_ids)
    if not job_ids:
        return set()
    owners_hear = failing is not None
    if on_postgresql():
        with connection.cursor() as cursor:
            cursor.execute(_listening_sql(owners_hear), [job_ids, list(failing)] if owners_hear else [job_ids])
            return {row[0] for row in cursor.fetchall()}
    listening = (Exists(Channel.objects.filter(project_id=OuterRef("project_id"), enabled=True))
                 | Exists(EventSubscription.objects.filter(project_id=OuterRef("project_id"), enabled=True)))
    if owners_hear:
        listening |= Q(id__in=list(failing)) | Exists(AlertState.objects.filter(job_id=OuterRef("id"),
                                                                                 failure_notified=True))
    return set(Job.objects.filter(Q(id__in=job_ids) & listening).values_list("id", flat=True))
