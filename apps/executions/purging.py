"""Deleting executions in short batches: a deleted job's history after it, and (for
apps.billing.retention) runs past their retention.

A job with a long history has millions of executions and attempts. Deleting them in the
request that deletes the job held its locks for as long as that took and could outlast the
request's timeout. Instead ``delete_job`` removes the job (and what hangs off it but its
executions) and its unfinished runs at once, and leaves a DeletedJob row behind; a task on
the default queue then deletes the history in transactions of at most RETENTION_BATCH_SIZE
runs, the retention purge's way, and the hourly retention purge finishes what a lost task
left. Until the history is gone, the DeletedJob row hides it from its organization
(Execution.objects.for_organization, the data export, the roll-ups); it is kept
KEEP_TOMBSTONE longer so that a run a racing trigger inserted is purged too.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from datetime import timedelta

from celery import current_app
from django.conf import settings
from django.db import connection, models, transaction
from django.db.models.deletion import get_candidate_relations_to_delete

from apps.sql.modes import on_postgresql

from . import queries
from .models import DeletedJob, Execution

log = logging.getLogger(__name__)

KEEP_TOMBSTONE = timedelta(hours=1)
#: The task that purges one deleted job's history, sent by name (apps/executions/tasks.py runs it).
PURGE_DELETED_JOB_TASK = "apps.executions.tasks.purge_deleted_job"
UNFINISHED = (Execution.Status.QUEUED, Execution.Status.RUNNING)


@dataclass
class PurgeReport:
    executions: int = 0
    batches: int = 0
    longest_batch_seconds: float = 0.0


# --- the job


def delete_job(job):
    """Delete ``job`` now and its history in batches after the commit (see the module)."""
    delete_jobs([job])


def delete_jobs(jobs):
    """Delete ``jobs`` (e.g. a project's, before the project goes) now, each one's history
    in batches after the commit: ``delete_job`` for many."""
    from apps.jobs.models import Job

    jobs = list(jobs)
    if not jobs:
        return
    ids = [job.pk for job in jobs]
    with transaction.atomic():
        release_dependents(Job, ids, keep={Execution})
        # The rows last. A scheduler claiming a job holds its due row (JobDue), whose delete
        # among the dependents above waits for the claim's commit: its new runs are then visible.
        Job._base_manager.filter(pk__in=ids)._raw_delete(connection.alias)
        DeletedJob.objects.bulk_create([DeletedJob(job_id=job.pk, organization_id=job.organization_id)
                                        for job in jobs])
        unfinished = list(Execution.objects.filter(job_id__in=ids, status__in=UNFINISHED).values_list("id", flat=True))
        delete_executions(unfinished)
        for job_id in ids:
            transaction.on_commit(lambda job_id=job_id: _publish_purge(job_id))


def _publish_purge(job_id):
    try:
        current_app.send_task(PURGE_DELETED_JOB_TASK, args=[str(job_id)], queue=settings.CELERY_TASK_DEFAULT_QUEUE,
                              ignore_result=True)
    except Exception:  # noqa: BLE001 - the job is deleted; the hourly purge deletes its history
        log.warning("job %s: the purge of its history was not published; the hourly purge will do it",
                    job_id, exc_info=True)


def purge_deleted_job(job_id, *, batch_size=None, report=None):
    """Delete the deleted job's executions, a batch per transaction."""
    batch_size = max(1, batch_size or settings.RETENTION_BATCH_SIZE)
    report = report or PurgeReport()
    history = Execution.objects.filter(job_id=job_id)
    while True:
        started = time.monotonic()
        with transaction.atomic():
            count = delete_executions(list(history.order_by().values_list("id", flat=True)[:batch_size]))
        report.longest_batch_seconds = max(report.longest_batch_seconds, time.monotonic() - started)
        if count:
            report.executions += count
            report.batches += 1
        if count < batch_size:
            return report


def purge_deleted_jobs(*, now, batch_size=None):
    """Purge the history of every deleted job; forget those deleted KEEP_TOMBSTONE ago."""
    report = PurgeReport()
    for tombstone in DeletedJob.objects.order_by("deleted_at"):
        purge_deleted_job(tombstone.job_id, batch_size=batch_size, report=report)
        if tombstone.deleted_at <= now - KEEP_TOMBSTONE:
            tombstone.delete()
    return report


# --- rows and what hangs off them


def dependents(model):
    """(model, field, on_delete) of every foreign key to ``model``, hidden ones (related_name
    "+") included, read from the models as Django's own delete does."""
    return [(relation.related_model, relation.field, relation.on_delete)
            for relation in get_candidate_relations_to_delete(model._meta)]


def release_dependents(model, ids, *, keep=()):
    """Apply each foreign key's on_delete to the rows pointing at ``ids`` of ``model`` (but
    from the models in ``keep``): CASCADE rows go (with what hangs off them), SET_NULL links
    are cut."""
    for related, field, on_delete in dependents(model):
        if related in keep or on_delete is models.DO_NOTHING:
            continue
        rows = related._base_manager.filter(**{f"{field.name}__in": ids})
        if on_delete is models.CASCADE:
            rows.delete()
        elif on_delete is models.SET_NULL:
            rows.update(**{field.name: None})
        else:
            raise NotImplementedError(f"{related.__name__}.{field.name}: on_delete {on_delete.__name__}")


def delete_executions(ids):
    """Delete the executions ``ids`` and what hangs off them (attempts; replays lose their
    link); returns how many executions. The caller holds the transaction."""
    if not ids:
        return 0
    if on_postgresql():
        return queries.delete_executions(ids, dependents(Execution))
    release_dependents(Execution, ids)
    batch = Execution.objects.filter(id__in=ids)
    return batch._raw_delete(batch.db)
