"""Metrics move when runs happen: a real scheduler and a real Celery worker write their
metrics to the multiprocess folder; /metrics, scraped before and after, adds them up.
The same run shows the processes' heartbeats in /readyz and the execution id in the
worker's JSON log lines."""

import json
import sys

import pytest
from django.utils import timezone

from apps.executions.models import Execution
from apps.observability.models import Heartbeat
from tests.support.broker import use_private_queue
from tests.support.processes import Process, process_env, start_scheduler, unique_node_name, wait_for

from .scrape import scrape, value

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FAST = dict(OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", SWEEPER_INTERVAL=0.5, SWEEPER_REPUBLISH_AFTER=30,
            DELIVERY_LEASE_MARGIN=2, HEARTBEAT_INTERVAL=0.5)


def start_debug_worker(tmp_path, queue, **env):
    """A worker logging JSON at DEBUG, so urllib3's line for each request is printed from the
    thread that sends it."""
    args = [sys.executable, "-m", "celery", "-A", "config", "worker", "--queues", queue, "--pool", "threads",
            "--concurrency", "2", "--hostname", unique_node_name("obs"), "--without-mingle", "--without-gossip",
            "--loglevel", "DEBUG"]
    return Process(args, process_env(LOG_FORMAT="json", LOG_LEVEL="DEBUG", **env), tmp_path / "worker.log")


def json_lines(text):
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                yield json.loads(line)
            except ValueError:
                continue


def scrape_once_counted(client, runs):
    """Counters move once the recording transaction has committed, a moment after the
    finished rows are visible to the test: scrape until the runs are counted."""
    latest = {}

    def counted():
        latest["samples"] = scrape(client)
        return value(latest["samples"], "cronsvc_executions_total") >= runs

    wait_for(counted, timeout=10, message=f"{runs} runs counted in cronsvc_executions_total")
    return latest["samples"]


def test_runs_move_the_metrics_of_every_process(tmp_path, client, metrics_open, make_tenant, make_job, target):
    folder = tmp_path / "prometheus"
    folder.mkdir()
    metrics_open.PROMETHEUS_MULTIPROC_DIR = str(folder)
    tenant = make_tenant(plan="enterprise")
    queue = use_private_queue(tenant)
    # Once each: a schedule that recurs within the test (make_job's */5) gave a second run
    # when the test crossed a five-minute boundary (CI).
    yearly = "0 0 1 1 *"
    ok = make_job(tenant, url=target.url("/ok"), next_run_at=timezone.now(), cron_expression=yearly)
    bad = make_job(tenant, url=target.url("/status/500"), next_run_at=timezone.now(), max_attempts=1,
                   cron_expression=yearly)

    before = scrape(client)
    assert value(before, "cronsvc_executions_total", status="succeeded") == 0
    assert value(before, "cronsvc_queue_depth", queue=queue) == 0

    env = dict(FAST, PROMETHEUS_MULTIPROC_DIR=folder)
    scheduler = start_scheduler(tmp_path, **env)
    worker = start_debug_worker(tmp_path, queue, **env)
    try:
        wait_for(lambda: Execution.objects.filter(job__in=[ok, bad], finished_at__isnull=False).count() >= 2,
                 timeout=60, message="both runs to finish")
        wait_for(lambda: Heartbeat.objects.filter(kind="worker").exists()
                 and Heartbeat.objects.filter(kind="scheduler").exists(), timeout=20, message="heartbeats")
        after = scrape_once_counted(client, runs=2)
        ready = client.get("/readyz").json()
    finally:
        codes = scheduler.stop(), worker.stop()
    assert codes == (0, 0), worker.output()[-3000:]

    assert value(after, "cronsvc_dispatches_total") >= 2
    assert value(after, "cronsvc_dispatch_lag_seconds_count") >= 2
    assert value(after, "cronsvc_scheduler_ticks_total") >= 1
    assert value(after, "cronsvc_executions_total", status="succeeded") >= 1
    failed = Execution.objects.get(job=bad)
    assert value(after, "cronsvc_executions_total", status=failed.status, error_kind=failed.error_kind) >= 1
    assert value(after, "cronsvc_attempts_total") >= 2
    assert value(after, "cronsvc_delivery_duration_seconds_count") >= 2
    assert ("cronsvc_queue_depth", (("queue", queue),)) in after

    assert [p["name"] for p in ready["processes"]["workers"] if p["alive"]], ready
    assert [p for p in ready["processes"]["schedulers"] if p["alive"]], ready
    assert not Heartbeat.objects.exists()  # a clean stop removes the process's row

    execution = Execution.objects.get(job=ok)
    logged = [line for line in json_lines(worker.output()) if line.get("execution_id") == str(execution.id)]
    assert logged, worker.output()[-3000:]
    assert {"timestamp", "level", "logger", "message"} <= set(logged[0])
