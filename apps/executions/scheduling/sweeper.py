"""Repairs what the broker lost: the database, not the broker, is the source of truth.

- A run committed as ``queued`` whose message never reached a worker (broker down,
  scheduler killed between commit and publish, the broker restarted) is published again
  after SWEEPER_REPUBLISH_IDLE_AFTER seconds when its queue holds no waiting message (so
  its message cannot be waiting there), else after SWEEPER_REPUBLISH_AFTER seconds (a
  backlog: its message may still be in line, and re-sending it would only lengthen it).
- A retry waiting in the database (``published_at`` empty, ``next_attempt_at`` passed)
  is published when it comes due.
- A run left ``running`` past its lease (its worker died, or stopped renewing it: see
  leases.py) is taken back: a new lease token on the row (so nothing its old worker writes
  later counts: the fencing rule, docs/architecture.md) and back to the queue, published at
  once; the next worker's request carries the same ``webhook-id``. Past LEASE_MAX_RECLAIMS
  take-backs the run fails instead (error kind ``lease_lost``): no run is sent forever.

Times are the database's (``statement_timestamp()``) unless a caller passes one (tests). Every
step claims rows with ``FOR UPDATE SKIP LOCKED`` and a conditional update, so any
number of sweepers (one per scheduler process) never publish the same row twice in a
round. A duplicate message is harmless anyway: the worker's claim is atomic.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from apps.eventstream import outbox
from apps.sql.modes import on_postgresql

from .. import events, queries
from ..hooks import RunOutcome, run_outcome_hooks
from ..models import Execution

log = logging.getLogger("cronsvc.scheduler")

QUEUED = Execution.Status.QUEUED
RUNNING = Execution.Status.RUNNING
FAILED = Execution.Status.FAILED


def _claim(queryset, limit, **changes):
    with transaction.atomic():
        ids = list(queryset.select_for_update(skip_locked=True).values_list("id", flat=True)[:limit])
        if not ids:
            return []
        Execution.objects.filter(id__in=ids).update(**changes)
        return list(Execution.objects.filter(id__in=ids).values_list("id", "queue"))


def due_retries(now=None, *, limit=1000, held_queues=()):
    """Mark and return (id, queue) of queued runs never published whose time has come:
    retries waiting in the database, runs held back by a concurrency cap or an open
    circuit, runs deferred to a window's opening, and low-priority runs held while their
    queue was overloaded, unless it still is (their queue in ``held_queues``; overload.py).
    The scheduler asks every tick, so a retry starts within about a second."""
    now = now or database_now()
    never_published = Q(published_at__isnull=True) & (Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
    queryset = Execution.objects.filter(Q(status=QUEUED) & never_published)
    if held_queues:
        queryset = queryset.exclude(defer_reason="overload", queue__in=list(held_queues))
    return _claim(queryset.order_by("next_attempt_at"), limit, published_at=now)


def stale(now=None, *, republish_after, limit=1000, idle_queues=(), idle_after=None):
    """Mark and return (id, queue) of queued runs published so long ago that their message
    must have been lost (broker restarted, publish failed after the commit): after
    ``republish_after`` seconds, or ``idle_after`` in ``idle_queues`` (queues with no
    message waiting). A message a worker holds but has not claimed yet may be sent twice:
    harmless, the claim is atomic."""
    now = now or database_now()
    lost = Q(published_at__lt=now - timedelta(seconds=republish_after))
    if idle_queues and idle_after is not None:
        lost |= Q(queue__in=list(idle_queues), published_at__lt=now - timedelta(seconds=idle_after))
    queryset = Execution.objects.filter(Q(status=QUEUED) & lost)
    return _claim(queryset.order_by("published_at"), limit, published_at=now)


#: error_kind of a run taken back more than LEASE_MAX_RECLAIMS times.
LEASE_LOST = "lease_lost"


def database_now():
    """The database's clock: what decides leases (a process's own clock may be skewed)."""
    if not on_postgresql():
        return timezone.now()
    return queries.database_now()


def recover_expired_leases(now=None, *, limit=1000, max_reclaims=None):
    """Take back the runs whose lease ran out by the database's clock (or ``now``): each
    under a new token, back to ``queued`` and marked published; one taken back more than
    ``max_reclaims`` times (LEASE_MAX_RECLAIMS) fails with error kind ``lease_lost``.
    Returns (id, queue) of the runs to publish."""
    max_reclaims = settings.LEASE_MAX_RECLAIMS if max_reclaims is None else max_reclaims
    with transaction.atomic():
        now = now or database_now()
        ids = list(Execution.objects.filter(status=RUNNING, lease_expires_at__lt=now)
                   .select_for_update(skip_locked=True).values_list("id", flat=True)[:limit])
        if not ids:
            return []
        taken = Execution.objects.filter(id__in=ids)
        taken.update(lease_token=F("lease_token") + 1, lease_reclaims=F("lease_reclaims") + 1,
                     lease_expires_at=None)
        failing = list(taken.filter(lease_reclaims__gt=max_reclaims).values_list("id", "job_id", "organization_id"))
        if failing:
            _fail_lost(failing, now, max_reclaims)
        rows = list(taken.filter(status=RUNNING).values_list("id", "queue"))
        Execution.objects.filter(id__in=[row[0] for row in rows]).update(status=QUEUED, published_at=now)
        if rows and outbox.enabled():
            recovered = Execution.objects.filter(id__in=[row[0] for row in rows]).select_related("job")
            events.changed(recovered, QUEUED, RUNNING, now, reason="lease_expired")
    if failing:
        log.warning("sweeper: %d runs failed after their lease ran out %d times", len(failing), max_reclaims + 1)
    return rows


def _fail_lost(failing, now, max_reclaims):
    message = (f"the run's lease ran out {max_reclaims + 1} times (its workers died or stopped); "
               "it is not sent again")
    ids = [execution_id for execution_id, _, _ in failing]
    Execution.objects.filter(id__in=ids).update(status=FAILED, finished_at=now, error_kind=LEASE_LOST,
                                                error_message=message)
    if outbox.enabled():
        events.changed(Execution.objects.filter(id__in=ids).select_related("job"), FAILED, RUNNING, now,
                       error_kind=LEASE_LOST)
    run_outcome_hooks([RunOutcome(execution_id=execution_id, job_id=job_id, organization_id=organization_id,
                               status=FAILED, finished_at=now, error_kind=LEASE_LOST, error_message=message)
                       for execution_id, job_id, organization_id in failing])
