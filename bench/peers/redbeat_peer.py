"""celery-redbeat as a peer of cronsvc's scheduler (bench/bench_scheduler.py --peers).

A Celery app of its own (no Django): ``celery -A redbeat_peer beat -S redbeat.RedBeatScheduler``
dispatches, ``celery -A redbeat_peer worker`` consumes; the task records its receipt (entry
name and time) in a Redis list and then, given a target (PEER_TARGET_URL), does what a cronsvc
run does and what a Celery user's task for an HTTP job would: sends entry i's request (GET, or
POST one time in four, to <target>/<i>, the URLs of bench_scheduler.py's jobs) with a
keep-alive ``requests`` session of its process, and reads the answer. N entries are stored the way
``RedBeatSchedulerEntry.save()`` stores them (a hash per entry, its due time in the
``redbeat::schedule`` sorted set), in pipelines of 1,000 so that loading 100k entries does
not take minutes; each has ``schedule(run_every=1 day)`` and ``last_run_at`` one day before
the instant T, so each is due exactly at T and once during a run: a second receipt of one
entry is a duplicate.

Configuration: redbeat's recommended one (its README): the broker and ``redbeat_redis_url``
on the same Redis, the default lock (``redbeat_lock_timeout`` = 5 x beat's max interval);
the worker with Celery's defaults (prefork, one process per core, prefetch multiplier 4).
Environment: PEER_REDIS_URL, PEER_TARGET_URL (empty: record only).
"""

import json
import os
import time
from datetime import datetime, timedelta, timezone

import redis
import requests
from celery import Celery
from celery.schedules import schedule
from celery.signals import worker_ready

URL = os.environ.get("PEER_REDIS_URL", "redis://127.0.0.1:6379/17")
TARGET = os.environ.get("PEER_TARGET_URL", "")
RECEIPTS = "bench:receipts"
TASK = "redbeat_peer.record"

app = Celery("redbeat_peer", broker=URL)
app.conf.update(redbeat_redis_url=URL, broker_connection_retry_on_startup=True, timezone="UTC", enable_utc=True,
                worker_hijack_root_logger=False)
_receipts = redis.Redis.from_url(URL)
_http = requests.Session()


READY = "bench:worker-ready"


@worker_ready.connect
def _say_ready(**_):
    _receipts.set(READY, "1")  # the worker logs at WARNING (its default): no " ready." line to wait for


@app.task(name=TASK, ignore_result=True)
def record(name):
    _receipts.rpush(RECEIPTS, f"{name} {time.time():.6f}")
    if TARGET:
        i = int(name[1:])
        # requests reads the whole answer (stream=False), so the connection is kept for the next
        return _http.request("POST" if i % 4 == 0 else "GET", f"{TARGET}/{i}", timeout=30).status_code
    return None


def load_entries(n, at):
    """N entries due at ``at`` (a UTC datetime), stored as RedBeatSchedulerEntry.save() does."""
    from redbeat.decoder import RedBeatJSONEncoder
    from redbeat.schedulers import ensure_conf

    ensure_conf(app)
    conf = app.redbeat_conf
    client = redis.Redis.from_url(URL)
    every = schedule(run_every=timedelta(days=1), app=app)
    meta = json.dumps({"last_run_at": at - timedelta(days=1)}, cls=RedBeatJSONEncoder)
    pipe = client.pipeline(transaction=False)
    for i in range(n):
        name = f"s{i}"
        key = conf.key_prefix + name
        definition = {"name": name, "task": TASK, "args": [name], "kwargs": {}, "options": {}, "schedule": every,
                      "enabled": True}
        pipe.hset(key, "definition", json.dumps(definition, cls=RedBeatJSONEncoder))
        pipe.hset(key, "meta", meta)
        pipe.zadd(conf.schedule_key, {key: at.timestamp()})
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()
    return conf.schedule_key


def due_left(client, schedule_key, at):
    """Entries still due at ``at`` (beat moves an entry's score on once it has sent it)."""
    return client.zcount(schedule_key, 0, at.timestamp())


def receipts(client):
    """[(entry name, receipt time)] in order of receipt."""
    return [(name.decode(), float(when)) for name, when in (raw.split() for raw in client.lrange(RECEIPTS, 0, -1))]


def now_utc():
    return datetime.now(timezone.utc)
