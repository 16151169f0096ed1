"""Real scheduler processes on PostgreSQL (directly, or through PgBouncer in transaction
pooling mode) and Redis or RabbitMQ: nothing missing, nothing doubled."""

import socket
import subprocess
import time
from collections import Counter, defaultdict
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from apps.executions.models import Execution
from apps.observability.models import Heartbeat
from apps.jobs.models import Job
from tests.support.broker import published_ids, use_private_queue
from tests.support.processes import Process, start_scheduler, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def create_interval_jobs(make_job, tenant, count, seconds, first_run):
    jobs = [
        Job(project=tenant.project, organization=tenant.organization, name=f"j{i}",
            schedule_type="interval", interval_seconds=seconds, start_at=first_run,
            cron_expression="", url="https://example.com/", next_run_at=first_run)
        for i in range(count)
    ]
    return Job.objects.bulk_create(jobs)


def assert_one_row_per_occurrence(jobs, first_run, seconds, until):
    rows = defaultdict(list)
    for job_id, at in Execution.objects.values_list("job_id", "scheduled_for"):
        rows[job_id].append(at)
    expected_count = int((until - first_run).total_seconds() // seconds) + 1
    for job in jobs:
        times = sorted(rows[job.id])
        expected = [first_run + timedelta(seconds=seconds * k) for k in range(len(times))]
        assert times == expected, f"job {job.id}: gaps or doubles in {times}"
        assert len(times) >= expected_count, f"job {job.id}: {len(times)} runs, expected {expected_count}"


def assert_published_exactly_once(broker, queue):
    published = Counter(broker.published_ids(queue))
    queued = {str(i) for i in Execution.objects.filter(status="queued").values_list("id", flat=True)}
    assert set(published) == queued
    doubled = [i for i, n in published.items() if n > 1]
    assert not doubled, f"{len(doubled)} executions published more than once"


@pytest.mark.parametrize(("schedulers", "live_broker", "live_database"),
                         [(2, "redis", "direct"), (4, "redis", "direct"), (4, "rabbitmq", "direct"),
                          (4, "redis", "pgbouncer")], indirect=["live_broker", "live_database"])
def test_many_schedulers_record_each_occurrence_exactly_once(tmp_path, make_tenant, make_job, live_broker,
                                                             live_database, schedulers):
    tenant = make_tenant(plan="enterprise")
    queue = live_broker.private_queue(tenant)
    procs = [start_scheduler(tmp_path, f"s{i}", SWEEPER_REPUBLISH_AFTER=3600, **live_broker.env, **live_database.env)
             for i in range(schedulers)]
    try:
        # The jobs come due only once every scheduler is up, however slowly a loaded machine starts them:
        # the test is about racing schedulers, not about start-up time.
        wait_for(lambda: Heartbeat.objects.filter(kind=Heartbeat.Kind.SCHEDULER).count() >= schedulers,
                 timeout=90, message="every scheduler running")
        first_run = timezone.now() + timedelta(seconds=2)
        until = first_run + timedelta(seconds=6)
        jobs = create_interval_jobs(make_job, tenant, 300, 2, first_run)
        wait_for(lambda: not Job.objects.filter(due__next_run_at__lte=until).exists(), timeout=90,
                 message="every occurrence up to the window's end claimed")
        time.sleep(1)  # lets a scheduler that would wrongly claim an occurrence twice do so before the stop
    finally:
        codes = [p.stop() for p in procs]
    assert codes == [0] * schedulers, [p.output()[-2000:] for p in procs]
    assert_one_row_per_occurrence(jobs, first_run, 2, until)
    assert_published_exactly_once(live_broker, queue)


@pytest.mark.parametrize(("live_broker", "live_database"), [("redis", "direct"), ("rabbitmq", "direct"),
                                                            ("redis", "pgbouncer")], indirect=True)
def test_scheduler_killed_mid_batch_loses_and_doubles_nothing(tmp_path, make_tenant, make_job, live_broker,
                                                              live_database):
    tenant = make_tenant(plan="enterprise")
    queue = live_broker.private_queue(tenant)
    due = timezone.now().replace(microsecond=0) - timedelta(seconds=1)
    jobs = create_interval_jobs(make_job, tenant, 6000, 3600, due)
    env = dict(SCHEDULER_BATCH_SIZE=200, SCHEDULER_BACKLOG_BATCH_SIZE=200,  # small even while backlogged: killed mid-burst
               SWEEPER_REPUBLISH_AFTER=2, SWEEPER_INTERVAL=0.5, **live_broker.env,
               **live_database.env)
    first = start_scheduler(tmp_path, "first", **env)
    wait_for(lambda: Execution.objects.count() >= 400, timeout=30, message="a few batches")
    first.kill()
    first.stop()
    interrupted_at = Execution.objects.count()
    assert interrupted_at < len(jobs), "the kill came too late to interrupt the work"
    second = start_scheduler(tmp_path, "second", **env)
    try:
        wait_for(lambda: not Job.objects.filter(due__next_run_at__lte=timezone.now()).exists(), timeout=60,
                 message="every due job claimed")
        wait_for(lambda: len(set(live_broker.published_ids(queue))) == len(jobs), timeout=30,
                 message="every execution published")
    finally:
        assert second.stop() == 0, second.output()[-2000:]
    assert Execution.objects.count() == len(jobs)
    assert_one_row_per_occurrence(jobs, due, 3600, due)
    assert set(live_broker.published_ids(queue)) == {str(i) for i in Execution.objects.values_list("id", flat=True)}


def test_broker_outage_is_repaired_by_the_sweeper(tmp_path, make_tenant, make_job):
    tenant = make_tenant(plan="enterprise")
    queue = use_private_queue(tenant)
    port = _free_port()
    broker_url = f"redis://127.0.0.1:{port}/0"
    redis_server = _start_redis(tmp_path, port)
    scheduler = start_scheduler(tmp_path, CELERY_BROKER_URL=broker_url, SWEEPER_REPUBLISH_AFTER=1,
                                SWEEPER_INTERVAL=0.5)
    try:
        redis_server.stop()  # the broker goes away
        due = timezone.now() - timedelta(seconds=1)
        jobs = create_interval_jobs(make_job, tenant, 50, 3600, due)
        wait_for(lambda: Execution.objects.count() == 50, timeout=30, message="executions committed")
        redis_server = _start_redis(tmp_path, port)  # back, and empty
        client = redis.Redis(port=port)
        wait_for(lambda: client.llen(queue) > 0 and set(published_ids(client, queue)) >= {str(j) for j in _ids()},
                 timeout=30, message="the sweeper to re-publish")
    finally:
        code = scheduler.stop()
        redis_server.stop()
    assert code == 0, scheduler.output()[-3000:]
    assert len(jobs) == Execution.objects.count() == 50


def _ids():
    return Execution.objects.values_list("id", flat=True)


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _start_redis(tmp_path, port):
    proc = Process(["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                   env=None, log_path=tmp_path / f"redis-{port}.log")
    wait_for(lambda: subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True).returncode == 0,
             timeout=10, message="redis to start")
    return proc
