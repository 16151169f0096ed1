"""A worker survives what used to end it (architecture invariant 6): a poison message on
its queue, Redis at maxmemory, and its broker going away. Real processes: the Procfile's
enterprise worker against a private redis-server (soak/services.py), on the test database,
delivering to a local endpoint."""

import json
import time

import pytest
import redis as redis_lib
from celery import Celery

from apps.executions.worker import deadletters
from apps.executions.models import Execution
from apps.executions.tasks import RUN_TASK
from soak.services import PrivateRedis
from tests.support.broker import queued_runs
from tests.support.processes import start_procfile_process, wait_for
from tests.support.processes import start_worker as start_plain_worker

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

QUEUE = "runs.enterprise"  # the Procfile worker's own queue, on a Redis no other test shares
ENV = dict(OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", SWEEPER_INTERVAL=0.5, SWEEPER_REPUBLISH_AFTER=5,
           DELIVERY_LEASE_MARGIN=2, WORKER_CONCURRENCY=2)


@pytest.fixture
def private_redis(tmp_path, settings, target):
    """A redis-server of the test's own; this process's dead letters go to it as the
    worker's do (REDIS_URL). After ``target``, which readies the shared Redis."""
    server = PrivateRedis(tmp_path)
    server.start()
    settings.REDIS_URL = server.url
    server.client = redis_lib.Redis.from_url(server.url)
    yield server
    server.client.close()
    server.stop()


@pytest.fixture
def start_worker(tmp_path, private_redis):
    started = []

    def start():
        worker = start_procfile_process(tmp_path, "worker_enterprise", **ENV, REDIS_URL=private_redis.url)
        started.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in started:
        worker.stop()


def send_runs(url, ids, queue=QUEUE):
    sender = Celery(broker=url, set_as_current=False)
    with sender.connection_for_write() as connection:
        for execution_id in ids:
            sender.send_task(RUN_TASK, args=[[str(execution_id)]], queue=queue, connection=connection)


def succeeded(ids):
    return Execution.objects.filter(id__in=ids, status="succeeded").count()


def assert_alive(worker):
    assert worker.popen.poll() is None, worker.output()[-4000:]
    assert "Unrecoverable error" not in worker.output()


def test_poison_messages_are_dead_lettered_and_the_worker_goes_on(private_redis, start_worker, make_tenant,
                                                                   make_job, target):
    job = make_job(make_tenant(plan="enterprise"), url=target.url("/ok"))
    ids = queued_runs(job, QUEUE, 3)
    worker = start_worker()
    client = private_redis.client
    poison = [
        b"this is not json",
        b"\xff\xfe not even utf-8",
        json.dumps({"execution_ids": [str(ids[0])]}).encode(),  # JSON, not a kombu message
        b"[1, 2, 3]",
    ]
    for raw in poison:
        client.lpush(QUEUE, raw)
    sender = Celery(broker=private_redis.url, set_as_current=False)
    sender.send_task("apps.executions.tasks.no_such_task", args=[[str(ids[0])]], queue=QUEUE)
    sender.send_task(RUN_TASK, args=["not a list of ids"], queue=QUEUE)
    send_runs(private_redis.url, ids)

    wait_for(lambda: succeeded(ids) == 3, timeout=60, message="the valid runs to succeed")
    wait_for(lambda: len(deadletters.entries()) == 6, timeout=10, message="six dead letters")
    assert_alive(worker)
    letters = list(reversed(deadletters.entries()))  # oldest first
    assert [letter["queue"] for letter in letters] == [QUEUE] * 6
    reasons = [letter["reason"] for letter in letters]
    assert reasons[0].startswith("not JSON") and reasons[1].startswith("not JSON")
    assert reasons[2].startswith("not a kombu message") and reasons[3].startswith("not a kombu message")
    assert reasons[4].startswith("unknown task") and reasons[5].startswith("wrong arguments")
    assert letters[0]["body"] == "this is not json"
    assert "execution_ids" in letters[2]["body"] and "not a list of ids" in letters[5]["body"]
    assert "dead letter from queue" in worker.output()
    assert [e.attempt for e in Execution.objects.filter(id__in=ids)] == [1, 1, 1]


def test_a_huge_poison_message_is_kept_cut_short(private_redis, start_worker, make_tenant, make_job, target):
    job = make_job(make_tenant(plan="enterprise"), url=target.url("/ok"))
    ids = queued_runs(job, QUEUE, 1)
    worker = start_worker()
    private_redis.client.lpush(QUEUE, b"x" * 1_000_000)
    send_runs(private_redis.url, ids)
    wait_for(lambda: succeeded(ids) == 1, timeout=60, message="the run to succeed")
    (letter,) = deadletters.entries()
    assert len(letter["body"]) < deadletters.BODY_LIMIT + 100
    assert letter["body"].endswith("[1000000 characters]")
    assert_alive(worker)


@pytest.mark.parametrize("live_broker", ["rabbitmq"], indirect=True)
def test_on_rabbitmq_what_celery_refuses_is_dead_lettered(tmp_path, private_redis, make_tenant, make_job, target,
                                                          live_broker):
    from kombu import Connection

    from apps.executions.scheduling import publishing

    tenant = make_tenant(plan="enterprise")
    queue = live_broker.private_queue(tenant)
    ids = queued_runs(make_job(tenant, url=target.url("/ok")), queue, 2)
    # RabbitMQ for messages, the private Redis for the rest (dead letters included).
    worker = start_plain_worker(tmp_path, [queue], name="rabbit", **ENV, **live_broker.env, REDIS_URL=private_redis.url)
    try:
        worker.wait_ready()
        with Connection(live_broker.url) as connection:
            producer = connection.Producer()
            for body in (b"this is not json", b'{"hello": "not a task"}'):
                producer.publish(body, exchange="", routing_key=queue, content_type="application/json",
                                 content_encoding="utf-8", serializer=None)
        publishing.publish({queue: ids})
        wait_for(lambda: succeeded(ids) == 2, timeout=60, message="the valid runs to succeed")
        wait_for(lambda: len(deadletters.entries()) == 2, timeout=10, message="two dead letters")
        assert_alive(worker)
    finally:
        worker.stop()
    reasons = [letter["reason"] for letter in reversed(deadletters.entries())]
    assert reasons[0].startswith("undecodable body") and reasons[1] == "not a Celery task message"
    assert [letter["queue"] for letter in deadletters.entries()] == [queue, queue]


def fill_to_maxmemory(client):
    """Redis refusing every write (noeviction) after a few hundred kB of filler, smaller and
    smaller values until even a short one is refused: its keys."""
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", str(client.info("memory")["used_memory"] + 300_000))
    keys = []
    for size in (10_000, 1_000, 50):
        try:
            for n in range(100_000):
                key = f"filler:{size}:{n}"
                client.set(key, b"x" * size)
                keys.append(key)
        except redis_lib.exceptions.OutOfMemoryError:
            continue
        raise AssertionError("Redis never reached maxmemory")
    # Held there: a connection's buffers or a key expiring would otherwise let the odd
    # write through.
    client.config_set("maxmemory", str(client.info("memory")["used_memory"] - 100_000))
    return keys


def test_a_worker_rides_out_redis_at_maxmemory(private_redis, start_worker, make_tenant, make_job, target):
    job = make_job(make_tenant(plan="enterprise"), url=target.url("/ok"))
    during, after = queued_runs(job, QUEUE, 3), queued_runs(job, QUEUE, 2)
    worker = start_worker()
    client = private_redis.client
    send_runs(private_redis.url, during, queue="staging")  # not consumed yet
    filler = fill_to_maxmemory(client)
    with pytest.raises(redis_lib.exceptions.OutOfMemoryError):
        client.lpush(QUEUE, b"refused")
    # RENAME needs no memory: the messages reach the worker's queue while Redis is full.
    client.rename("staging", QUEUE)
    wait_for(lambda: client.llen(QUEUE) == 0, timeout=30, message="the worker to take the messages")
    wait_for(lambda: "Redis is at maxmemory" in worker.output(), timeout=10, message="the worker to say so")
    assert_alive(worker)

    client.delete(*filler)  # memory back, and room to spare whatever else grew meanwhile
    client.config_set("maxmemory", "0")
    send_runs(private_redis.url, after)
    wait_for(lambda: succeeded(after) == 2, timeout=60, message="runs sent after the memory came back")
    # Those taken while Redis was full ran too (their broker note was kept in the process).
    wait_for(lambda: succeeded(during) == 3, timeout=60, message="the runs taken during the outage")
    assert_alive(worker)
    assert [e.attempt for e in Execution.objects.filter(id__in=during + after)] == [1] * 5


def test_a_worker_reconnects_after_its_broker_was_down(private_redis, start_worker, make_tenant, make_job,
                                                      target):
    job = make_job(make_tenant(plan="enterprise"), url=target.url("/ok"))
    before, after = queued_runs(job, QUEUE, 1), queued_runs(job, QUEUE, 2)
    worker = start_worker()
    send_runs(private_redis.url, before)
    wait_for(lambda: succeeded(before) == 1, timeout=60, message="a run before the outage")
    private_redis.stop()  # killed: every queued message and connection gone
    wait_for(lambda: "Trying again" in worker.output() or "reconnect" in worker.output().lower(), timeout=30,
             message="the worker to notice")
    private_redis.start()  # same port, empty
    assert_alive(worker)
    send_runs(private_redis.url, after)
    wait_for(lambda: succeeded(after) == 2, timeout=90, message="runs sent after the broker came back")
    assert_alive(worker)


def test_a_worker_never_gives_up_on_its_broker():
    from config.celery import app

    assert app.conf.broker_connection_max_retries is None  # Celery's default: exit after 100 tries


def test_a_worker_started_while_redis_is_at_maxmemory_waits_for_memory(tmp_path, private_redis, make_tenant,
                                                                      make_job, target):
    # Found by the chaos soak: a worker restarted while Redis was full declared its queues
    # (LLEN inside MULTI, refused at maxmemory), called the OutOfMemoryError unrecoverable
    # and exited with code 1.
    job = make_job(make_tenant(plan="enterprise"), url=target.url("/ok"))
    runs = queued_runs(job, QUEUE, 2)
    filler = fill_to_maxmemory(private_redis.client)
    worker = start_procfile_process(tmp_path, "worker_enterprise", **ENV, REDIS_URL=private_redis.url)
    try:
        wait_for(lambda: "maxmemory" in worker.output() or worker.popen.poll() is not None, timeout=60,
                 message="the worker to meet the full Redis")
        time.sleep(3)  # it retries; it does not exit
        assert_alive(worker)
        private_redis.client.delete(*filler)
        private_redis.client.config_set("maxmemory", "0")
        worker.wait_ready()
        send_runs(private_redis.url, runs)
        wait_for(lambda: succeeded(runs) == 2, timeout=60, message="runs sent after the memory came back")
        assert_alive(worker)
    finally:
        worker.stop()
