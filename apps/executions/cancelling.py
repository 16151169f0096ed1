"""Cancelling a run: a queued one never starts, a running one is abandoned at once.

The database decides, as everywhere else: one conditional UPDATE moves the run from
``queued`` or ``running`` to ``cancelled`` (with who and when), in the transaction of its
audit event and of the outcome hooks (a cancelled upstream ends its workflow run like a
skipped one). Nothing else needs telling for a queued run: a worker's claim takes only
``queued`` runs, and the sweeper and the scheduler republish only those, so a waiting retry
is never sent either. A running run's worker still has its request in flight: after the
commit a cancel flag goes to Redis (``raise_flags``), which the worker's watcher
(apps.executions.worker.cancel_watch) reads a few times a second to close the connection. The
worker's own recording then finds the run no longer ``running`` and leaves it cancelled:
its attempt is stored (outcome ``cancelled``), no retry is scheduled, the job's health is
untouched.
"""

from django.db import transaction
from django.utils import timezone

from apps.accounts.audit import audited
from apps.eventstream import outbox

from . import events
from .hooks import RunOutcome, run_outcome_hooks
from .models import Execution
from .shared_redis import redis_client

S = Execution.Status
UNFINISHED = (S.QUEUED, S.RUNNING)
#: How long a cancel flag stays in Redis: longer than any request may take.
FLAG_TTL_SECONDS = 24 * 3600


class ExecutionFinished(Exception):
    """The run finished before the cancel: its outcome stands."""

    def __init__(self, execution):
        super().__init__(f"execution {execution.pk} already finished ({execution.status})")
        self.execution = execution


class ExecutionGone(Exception):
    """The run was deleted (its job or organization with it) after the caller read it."""


def cancelled_by(*, user=None, api_key=None, operator=False):
    """How a cancel names who asked for it (Execution.cancelled_by)."""
    if api_key is not None:
        return {"kind": "api_key", "id": str(api_key.pk), "name": api_key.name}
    if user is not None:
        return {"kind": "operator" if operator else "user", "id": str(user.pk), "name": user.email}
    return {"kind": "system", "id": None, "name": "cronsvc"}


@audited
def cancel(execution, *, by, now=None, audit):
    """Cancel ``execution`` (an Execution of the caller's, as the caller read it) and return
    it reloaded.

    Idempotent: an execution already cancelled is returned as it is, with no audit event.
    Raises ExecutionFinished for one that finished otherwise, and ExecutionGone for one
    deleted since the caller read it (a job deleted at the same moment takes its runs)."""
    now = now or timezone.now()
    before = execution.status
    previous = _locked_status(execution) if outbox.enabled() else None  # the event says from what
    changed = Execution.objects.filter(pk=execution.pk, status__in=UNFINISHED).update(
        status=S.CANCELLED, cancelled_at=now, cancelled_by=by, finished_at=now,
        lease_expires_at=None, next_attempt_at=None,
    )
    execution = Execution.objects.filter(pk=execution.pk).first()
    if execution is None:
        raise ExecutionGone()
    if not changed:
        if execution.status == S.CANCELLED:
            return execution
        raise ExecutionFinished(execution)
    events.changed([execution], S.CANCELLED, previous, now)
    run_outcome_hooks([RunOutcome(execution_id=execution.pk, job_id=execution.job_id,
                               organization_id=execution.organization_id, status=S.CANCELLED,
                               finished_at=now)])
    audit("execution.cancel", execution, {"status_before": before})
    if execution.started_at is not None:  # a worker may have its request in flight
        # robust: Redis down leaves the run cancelled; its request then runs to its end.
        transaction.on_commit(lambda: raise_flags([execution.pk]), robust=True)
    return execution


def _locked_status(execution):
    return Execution.objects.select_for_update().filter(pk=execution.pk).values_list("status", flat=True).first()


GENERATION_KEY = "cronsvc:cancel:generation"


def flag_key(execution_id):
    return f"cronsvc:cancel:{execution_id}"


def raise_flags(execution_ids):
    """Tell the workers (through Redis) that these runs are cancelled. Without Redis
    (embedded mode) the workers ask the database instead."""
    client = redis_client()
    if client is None:
        return
    pipe = client.pipeline(transaction=False)
    for execution_id in execution_ids:
        pipe.set(flag_key(execution_id), "1", ex=FLAG_TTL_SECONDS)
    pipe.incr(GENERATION_KEY)  # after the flags: a watcher that sees the new count sees them
    pipe.execute()


def generation():
    """How many times flags were raised so far (None without Redis): a watcher that saw
    this count already need not read again the flags of the runs it read then."""
    client = redis_client()
    if client is None:
        return None
    return int(client.get(GENERATION_KEY) or 0)


def raised(execution_ids):
    """The ids among ``execution_ids`` that are cancelled: one Redis round trip, or one
    query by primary key without Redis."""
    ids = list(execution_ids)
    if not ids:
        return set()
    client = redis_client()
    if client is None:
        return set(Execution.objects.filter(pk__in=ids, status=S.CANCELLED).values_list("pk", flat=True))
    return {execution_id for execution_id, flag in zip(ids, client.mget([flag_key(i) for i in ids])) if flag}
