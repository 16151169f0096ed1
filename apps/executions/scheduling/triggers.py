"""Starting a run outside the schedule: the one function the job views call."""

from datetime import timedelta

from django.db import transaction

from apps.accounts.audit import audited
from apps.sql.clock import database_now
from .. import events
from . import publishing
from ..models import Execution
from ..routing import queue_for


@audited
def trigger_now(job, *, now=None, trigger=Execution.Trigger.MANUAL, replay_of=None, audit):
    """Create a queued execution for ``job`` and publish it once committed. The run, its
    event (when the stream is on) and the audit event of who asked commit together: one
    commit (one WAL flush) for all."""
    now = now or database_now()  # due now by the clock the worker's claim reads
    queue = queue_for(job.organization.plan.queue, job.region)
    execution = Execution.objects.create(
        job=job, organization_id=job.organization_id, scheduled_for=now, trigger=trigger,
        status=Execution.Status.QUEUED, queue=queue, created_at=now, published_at=now,
        replay_of=replay_of, job_version=job.version,
    )
    events.changed([execution], Execution.Status.QUEUED, "", now)
    audit("job.trigger", job, {"execution": str(execution.pk)})
    transaction.on_commit(lambda: publishing.publish({queue: [execution.id]}))
    return execution


class NotFinished(ValueError):
    """Only a finished execution can be replayed."""


@audited
def replay(execution, *, now=None, audit):
    """A new run of the execution's job, linked to it (trigger ``replay``)."""
    if execution.status not in Execution.FINAL_STATUSES:
        raise NotFinished("Only a finished execution can be replayed; wait until it is done.")
    new = trigger_now(execution.job, now=now, trigger=Execution.Trigger.REPLAY, replay_of=execution)
    audit("execution.replay", execution, {"replay": str(new.pk)})
    return new


@audited
def replay_all(executions, *, now=None, audit, action="execution.bulk_replay", target=None):
    """Replay each execution, all or none, with one audit event naming them all (``action``
    on ``target``: the page names a single replay after its run)."""
    now = now or database_now()
    # Distinct instants: two replays of one job must not collide on (job, scheduled_for, trigger).
    replays = [replay(execution, now=now + timedelta(microseconds=i)) for i, execution in enumerate(executions)]
    audit(action, target, {"replayed": [str(e.pk) for e in executions], "replays": [str(r.pk) for r in replays]})
    return replays
