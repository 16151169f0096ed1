"""The relay: the outbox published to Redis Streams, exactly once, in order.

Every scheduler process calls ``relay_round`` each tick (apps.executions.scheduling.process); one of
them publishes at a time, the others skip the round. A round:

1. numbers the entries not numbered yet, in the order they were written, in a transaction
   of its own that commits before anything is sent (the last number is kept in
   StreamCursor, so numbers only grow);
2. in a second transaction, sends every numbered entry, oldest number first, with
   ``XADD <key> MAXLEN ~ N <number>-0 ...`` in one pipeline: each entry's id is fixed by
   its number, so an entry already sent by a round that crashed before step 3 is refused
   by Redis (its id is not greater than the stream's last) and counted as sent;
3. deletes the entries sent, and commits.

Each of the two transactions holds the relay's transaction-scoped advisory lock
(PostgreSQL; a killed process's transaction ends with its connection), so two schedulers
never number or send at once, and send in number order. A transaction-scoped lock, not a
session's: behind a transaction pooler (PgBouncer) a session lock would stay on whichever
server session the pooler lent, and be "held" by every client that session serves next.

So nothing is lost (an entry leaves the outbox only once Redis has it) and nothing is
doubled (a resend carries the same id). Trimming keeps a stream's last id, so a resend
after trimming is refused too. Redis down: the entries wait in the outbox.
"""

from __future__ import annotations

import json
import logging
import os

import redis
from django.conf import settings
from django.db import transaction

from apps.sql.modes import on_postgresql

from . import outbox, queries
from .models import OutboxEntry, StreamCursor

log = logging.getLogger("cronsvc.eventstream")

BATCH = 1000
#: per round while the scheduler has due jobs waiting: dispatch goes first (apps.executions.scheduling.process)
BUSY_BATCH = 100
#: pg_try_advisory_xact_lock key of the relay ("cronsvc events").
LOCK_KEY = 0x63726F6E_65767473 & 0x7FFF_FFFF_FFFF_FFFF
_client = {"pid": None, "redis": None}


def stream_keys(organization_id):
    """The streams an event of ``organization_id`` goes to: its organization's, and the
    deployment's when EVENT_STREAM_DEPLOYMENT is on."""
    prefix = settings.EVENT_STREAM_PREFIX
    keys = [organization_stream(organization_id)]
    if settings.EVENT_STREAM_DEPLOYMENT:
        keys.append(f"{prefix}:all")
    return keys


def organization_stream(organization_id):
    return f"{settings.EVENT_STREAM_PREFIX}:org:{organization_id}"


def relay_round(batch=BATCH):
    """Publish up to ``batch`` entries; returns how many were sent (0 too when another
    process holds the relay's lock)."""
    if not settings.EVENT_STREAM:
        return 0
    with transaction.atomic():
        if not _relay_lock():
            return 0
        _number(batch)
    with transaction.atomic():
        if not _relay_lock():
            return 0  # another scheduler's round took over: it sends these
        entries = list(OutboxEntry.objects.filter(stream_id__isnull=False).order_by("stream_id")[:batch])
        if not entries:
            return 0
        _send(entries)
        OutboxEntry.objects.filter(id__in=[entry.id for entry in entries]).delete()
        return len(entries)


def _relay_lock():
    """Take the relay's lock until the transaction ends, unless another scheduler holds it."""
    if not on_postgresql():
        return True  # embedded mode (SQLite) runs one scheduler
    return queries.try_transaction_lock(LOCK_KEY)


def _number(batch):
    with transaction.atomic():
        StreamCursor.objects.get_or_create(id=1)
        cursor = StreamCursor.objects.select_for_update().get(id=1)
        numbered = queries.number_entries(cursor.last_id, batch)
        if numbered:
            StreamCursor.objects.filter(id=1).update(last_id=cursor.last_id + numbered)
    return numbered


def _send(entries):
    """XADD every entry to its streams in one pipeline; an id Redis refuses as not
    greater than the stream's last was sent before (a round cut short)."""
    maxlen = settings.EVENT_STREAM_MAXLEN
    pipe = _redis().pipeline(transaction=False)
    for entry in entries:
        fields = message(entry)
        for key in stream_keys(entry.organization_id):
            pipe.xadd(key, fields, id=f"{entry.stream_id}-0", maxlen=maxlen, approximate=True)
    resent = 0
    for reply in pipe.execute(raise_on_error=False):
        if isinstance(reply, redis.ResponseError) and "equal or smaller" in str(reply):
            resent += 1
        elif isinstance(reply, Exception):
            raise reply
    if resent:
        log.info("event stream: %d entries were already in their stream (a round was cut short)", resent)


def message(entry):
    """The stream entry's fields: ``type`` and ``organization`` to route on without
    parsing, ``event`` the whole event as JSON (docs/event-stream.md)."""
    event = render(entry)
    return {"type": event["type"], "organization": event["organization"],
            "event": json.dumps(event, separators=(",", ":"), default=str)}


def render(entry):
    event = {
        "id": str(entry.stream_id),
        "type": entry.type,
        "organization": str(entry.organization_id),
        "project": str(entry.project_id) if entry.project_id else None,
    }
    if entry.kind == OutboxEntry.Kind.EXECUTION:
        event.update(job=str(entry.subject_id), execution=str(entry.execution_id), attempt=entry.attempt)
    else:
        event["monitor"] = str(entry.subject_id)
    event.update(status=entry.status, previous=entry.previous or None, reason=entry.reason or None,
                 occurred_at=outbox.utc(entry.occurred_at))
    event.update(entry.detail or {})
    return event


def _redis():
    if _client["pid"] != os.getpid():
        _client.update(pid=os.getpid(), redis=redis.Redis.from_url(
            settings.EVENT_STREAM_REDIS_URL, **settings.REDIS_CLIENT_OPTIONS))
    return _client["redis"]
