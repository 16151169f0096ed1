"""Repairs what the broker lost: the database, not the broker, is the source of truth.

- A run committed as ``queued`` whose message never reached a worker (broker down,
  scheduler killed between commit and publish, the broker restarted) is published again
  after SWEEPER_REPUBLISH_IDLE_AFTER seconds when its queue holds no waiting message (so
  its message cannot be waiting there), else after SWEEPER_REPUBLISH_AFTER seconds (a
  backlog: its message may still be in line, and re-sending it would only lengthen it).
- A retry waiting in the database (``published_at`` empty, ``next_attempt_at`` passed)
  is published when it comes due.
- A run left ``running`` past its lease (its worker died) is handed back to the queue.

Every step claims rows with ``FOR UPDATE SKIP LOCKED`` and a conditional update, so any
number of sweepers (one per scheduler process) never publish the same row twice in a
round. A duplicate message is harmless anyway: the worker's claim is atomic.
"""

from datetime import timedelta

from django.db import transaction
from django.db.models import Q

from apps.eventstream import outbox

from . import events
from .models import Execution

QUEUED = Execution.Status.QUEUED
RUNNING = Execution.Status.RUNNING


def _claim(queryset, limit, **changes):
    with transaction.atomic():
        ids = list(queryset.select_for_update(skip_locked=True).values_list("id", flat=True)[:limit])
        if not ids:
            return []
        Execution.objects.filter(id__in=ids).update(**changes)
        return list(Execution.objects.filter(id__in=ids).values_list("id", "queue"))


def due_retries(now, *, limit=1000, held_queues=()):
    """Mark and return (id, queue) of queued runs never published whose time has come:
    retries waiting in the database, runs held back by a concurrency cap or an open
    circuit, runs deferred to a window's opening, and low-priority runs held while their
    queue was overloaded, unless it still is (their queue in ``held_queues``; overload.py).
    The scheduler asks every tick, so a retry starts within about a second."""
    never_published = Q(published_at__isnull=True) & (Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
    queryset = Execution.objects.filter(Q(status=QUEUED) & never_published)
    if held_queues:
        queryset = queryset.exclude(defer_reason="overload", queue__in=list(held_queues))
    return _claim(queryset.order_by("next_attempt_at"), limit, published_at=now)


def stale(now, *, republish_after, limit=1000, idle_queues=(), idle_after=None):
    """Mark and return (id, queue) of queued runs published so long ago that their message
    must have been lost (broker restarted, publish failed after the commit): after
    ``republish_after`` seconds, or ``idle_after`` in ``idle_queues`` (queues with no
    message waiting). A message a worker holds but has not claimed yet may be sent twice:
    harmless, the claim is atomic."""
    lost = Q(published_at__lt=now - timedelta(seconds=republish_after))
    if idle_queues and idle_after is not None:
        lost |= Q(queue__in=list(idle_queues), published_at__lt=now - timedelta(seconds=idle_after))
    queryset = Execution.objects.filter(Q(status=QUEUED) & lost)
    return _claim(queryset.order_by("published_at"), limit, published_at=now)


def recover_expired_leases(now, *, limit=1000):
    """Hand runs whose worker died back to the queue; return (id, queue) to publish."""
    queryset = Execution.objects.filter(status=RUNNING, lease_expires_at__lt=now)
    with transaction.atomic():
        rows = _claim(queryset, limit, status=QUEUED, lease_expires_at=None, published_at=now)
        if rows and outbox.enabled():
            recovered = Execution.objects.filter(id__in=[row[0] for row in rows]).select_related("job")
            events.changed(recovered, QUEUED, RUNNING, now, reason="lease_expired")
    return rows
