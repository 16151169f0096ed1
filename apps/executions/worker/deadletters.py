"""Dead letters: messages a worker took from a run queue and could not read.

A message that is not JSON, not a Celery message, names no task the worker knows or gives
the run task arguments of the wrong shape never stops a worker (architecture invariant 6).
It is put aside here, logged and counted (``cronsvc_dead_letters_total{reason}``), and the
worker goes on with the next message. No run is lost with it: a run whose message never
reached a worker stays ``queued`` in the database and the sweeper publishes it again.

The dead letters are a capped Redis list on REDIS_URL (newest first, ``MAX_ENTRIES``), each
entry a JSON object: when, which queue, why, which worker, and the raw body cut to
``BODY_LIMIT`` characters. Operators read and clear it with ``manage.py deadletters``
(docs/operations.md, "Dead letters"). When Redis refuses the write (it is down, or full:
``maxmemory``) the log line, which carries the same record, is what remains.
"""

import json
import logging
import os
import socket
from datetime import datetime, timezone

import redis
from django.conf import settings

from cronsvc.slot import Slot

log = logging.getLogger(__name__)

KEY = "cronsvc:deadletter"
MAX_ENTRIES = 1000
BODY_LIMIT = 2048
TIMEOUT_SECONDS = 2.0

_counter = Slot("dead-letter counter", "apps.observability", default=lambda reason: None)
_clients = {}


def on_dead_letter(count):
    """Register ``count(reason)``, called once per dead letter (observability's metric)."""
    return _counter.fill(count)


def record(queue, reason, body):
    """Put a message aside. ``body``: the raw message (bytes, str or anything JSON can
    show). Never raises: the caller is a worker's consuming loop."""
    entry = {
        "at": datetime.now(timezone.utc).isoformat(), "queue": queue or "", "reason": reason,
        "worker": f"{socket.gethostname()}:{os.getpid()}", "body": _cut(body),
    }
    try:
        _counter.get()(reason.partition(":")[0])
    except Exception:  # noqa: BLE001 - counting must not stop the worker either
        log.exception("counting a dead letter failed")
    stored = _store(entry)
    log.error("dead letter from queue %r (%s)%s: %s", queue, reason, "" if stored else " NOT STORED", entry["body"],
              extra={"dead_letter": entry})
    return stored


def _cut(body):
    if isinstance(body, (bytes, bytearray, memoryview)):
        body = bytes(body).decode("utf-8", "backslashreplace")
    elif not isinstance(body, str):
        try:
            body = json.dumps(body, default=repr)
        except (TypeError, ValueError):
            body = repr(body)
    return body if len(body) <= BODY_LIMIT else body[:BODY_LIMIT] + f"... [{len(body)} characters]"


def _store(entry):
    client = _client()
    if client is None:
        return False
    try:
        pipe = client.pipeline(transaction=True)
        pipe.lpush(KEY, json.dumps(entry)).ltrim(KEY, 0, MAX_ENTRIES - 1).execute()
        return True
    except redis.RedisError:
        log.warning("dead letter not stored in Redis", exc_info=True)
        return False


def _client():
    url = settings.REDIS_URL
    if not url:
        return None
    pid = os.getpid()  # a forked child never shares its parent's socket
    if _clients.get(url, (None, None))[0] != pid:
        _clients[url] = (pid, redis.Redis.from_url(url, socket_connect_timeout=TIMEOUT_SECONDS,
                                                   socket_timeout=TIMEOUT_SECONDS))
    return _clients[url][1]


def store_url():
    """The Redis that keeps them (REDIS_URL), or None: then they are only logged."""
    return settings.REDIS_URL or None


def count():
    client = _client()
    return client.llen(KEY) if client is not None else 0


def entries(limit=MAX_ENTRIES):
    """The newest ``limit`` dead letters (dicts), newest first."""
    client = _client()
    if client is None:
        return []
    return [json.loads(raw) for raw in client.lrange(KEY, 0, limit - 1)]


def purge(count=None):
    """Drop the oldest ``count`` dead letters (all when None); returns how many went."""
    client = _client()
    if client is None:
        return 0
    if count is None:
        pipe = client.pipeline(transaction=True)
        total, _ = pipe.llen(KEY).delete(KEY).execute()
        return total
    pipe = client.pipeline(transaction=True)
    total, _ = pipe.llen(KEY).ltrim(KEY, 0, -count - 1).execute()
    return min(total, count)
