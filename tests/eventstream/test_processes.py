"""The event stream across a publisher kill: real scheduler processes publish, the
documented example consumer (examples/event_consumer.py) reads with a consumer group."""

import json
import signal
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.eventstream.models import OutboxEntry
from apps.executions.models import Execution
from apps.jobs.models import Job
from tests.support.broker import use_private_queue
from tests.support.processes import Process, process_env, start_scheduler, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

JOBS = 2000


def start_consumer(tmp_path, stream, max_events):
    from django.conf import settings

    args = [sys.executable, "examples/event_consumer.py", "--redis", settings.REDIS_URL, "--stream", stream,
            "--group", "customer", "--consumer", "c1", "--max-events", str(max_events)]
    return Process(args, process_env(), tmp_path / "consumer.log")


@pytest.mark.parametrize("live_database", ["direct", "pgbouncer"], indirect=True)
def test_a_consumer_group_gets_every_event_once_across_a_publisher_kill(tmp_path, streams, make_tenant,
                                                                        live_database):
    tenant = make_tenant(plan="enterprise")
    queue = use_private_queue(tenant)
    stream = streams.of(tenant.organization.id)
    due = timezone.now().replace(microsecond=0) - timedelta(seconds=1)
    Job.objects.bulk_create([
        Job(project=tenant.project, organization=tenant.organization, name=f"j{i}", schedule_type="interval",
            interval_seconds=3600, start_at=due, cron_expression="", url="https://example.com/", next_run_at=due)
        for i in range(JOBS)])
    consumer = start_consumer(tmp_path, stream, JOBS)
    env = dict(EVENT_STREAM="on", EVENT_STREAM_PREFIX=streams.prefix, SCHEDULER_BATCH_SIZE=100,
               SCHEDULER_BACKLOG_BATCH_SIZE=100, **live_database.env)  # small even while backlogged: killed mid-stream
    try:
        first = start_scheduler(tmp_path, "first", **env)
        wait_for(lambda: streams.client.xlen(stream) >= 200, timeout=60, interval=0.02, message="events flowing")
        first.kill(signal.SIGKILL)  # mid-stream: no goodbye, its lock goes with its connection
        first.stop()
        assert streams.client.xlen(stream) < JOBS, "the kill came too late to interrupt the stream"
        second = start_scheduler(tmp_path, "second", **env)
        try:
            assert consumer.popen.wait(120) == 0, consumer.output()[-2000:]
        finally:
            assert second.stop() == 0, second.output()[-2000:]
    finally:
        consumer.stop()
        streams.client.delete(queue)
    events = [json.loads(line) for line in consumer.output().splitlines() if line.startswith("{")]
    executions = {str(i) for i in Execution.objects.values_list("id", flat=True)}
    assert len(executions) == JOBS
    assert len(events) == JOBS and {e["execution"] for e in events} == executions  # none lost, none doubled
    assert {e["type"] for e in events} == {"execution.queued"}
    ids = [int(e["id"]) for e in events]
    assert ids == sorted(ids) and len(set(ids)) == JOBS
    assert streams.client.xlen(stream) == JOBS  # nothing doubled in the stream itself either
    assert streams.client.xpending(stream, "customer")["pending"] == 0  # every event acknowledged
    assert not OutboxEntry.objects.exists()
