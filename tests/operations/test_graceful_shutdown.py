"""SIGTERM (a deploy, a scale-down, honcho's Ctrl-C) on each process type: in-flight work
finishes or is handed back, never lost, and the process exits 0.

(An idle worker's SIGTERM and a worker killed mid-request are in
tests/delivery/test_worker_process.py; a scheduler killed mid-batch in
tests/scheduler/test_processes.py.)"""

import signal
import socket
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from apps.executions.models import Execution
from apps.executions.scheduling.triggers import trigger_now
from apps.jobs.models import Job
from tests.support.broker import use_private_queue
from tests.support.processes import (Process, free_port, process_env, procfile_command, start_procfile_process,
                                     start_scheduler, start_worker, wait_for)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FAST = dict(OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", SWEEPER_INTERVAL=0.5, SWEEPER_REPUBLISH_AFTER=30,
            DELIVERY_LEASE_MARGIN=2)


def sigterm(process):
    process.popen.send_signal(signal.SIGTERM)


@pytest.mark.parametrize("handoff", [30, 1], ids=["on-the-task-thread", "handed-to-the-late-recorder"])
def test_worker_sigterm_mid_request_finishes_and_records_the_run(tmp_path, make_tenant, make_job, target, handoff):
    tenant = make_tenant(plan="enterprise")
    queue = use_private_queue(tenant)
    job = make_job(tenant, url=target.url("/slow?seconds=4"), timeout_seconds=10)
    worker = start_worker(tmp_path, [queue], DELIVERY_HANDOFF_SECONDS=handoff, **FAST)
    worker.wait_ready()
    execution = trigger_now(job)
    wait_for(lambda: target.requests_to("/slow"), timeout=30, message="the request to arrive")
    sigterm(worker)  # warm shutdown while the endpoint is still answering
    assert worker.popen.wait(60) == 0, worker.output()[-3000:]
    worker.stop()
    execution.refresh_from_db()
    assert execution.status == "succeeded", worker.output()[-3000:]
    assert execution.attempts.count() == 1
    assert len(target.requests_to("/slow")) == 1


def test_scheduler_sigterm_publishes_everything_it_committed(tmp_path, make_tenant, broker):
    tenant = make_tenant(plan="enterprise")
    queue = use_private_queue(tenant)
    due = timezone.now() - timedelta(seconds=1)
    Job.objects.bulk_create([
        Job(project=tenant.project, organization=tenant.organization, name=f"j{i}", schedule_type="interval",
            interval_seconds=3600, start_at=due, url="https://example.com/", next_run_at=due)
        for i in range(3000)
    ])
    # batches of 100 even while backlogged: the stop must land mid-burst
    scheduler = start_scheduler(tmp_path, SCHEDULER_BATCH_SIZE=100, SCHEDULER_BACKLOG_BATCH_SIZE=100,
                                SWEEPER_REPUBLISH_AFTER=3600)
    wait_for(lambda: Execution.objects.count() >= 300, timeout=60, message="a few batches")
    sigterm(scheduler)  # stops after the tick in hand: its commit is published, never half done
    assert scheduler.popen.wait(30) == 0, scheduler.output()[-3000:]
    scheduler.stop()
    created = {str(i) for i in Execution.objects.values_list("id", flat=True)}
    assert 0 < len(created) < 3000, "the stop came too late to interrupt the work"
    assert set(broker.published_ids(queue)) == created
    assert Execution.objects.filter(published_at__isnull=True).count() == 0
    broker.drop(queue)


def test_web_sigterm_finishes_the_request_in_flight(tmp_path):
    port = free_port()
    web = start_procfile_process(tmp_path, "web", PORT=port, WEB_CONCURRENCY=1)
    try:
        wait_for(lambda: _answers(port), timeout=120, message="the web process to answer")
        body = b"email=a%40b.test&password=x"
        with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
            conn.sendall(b"POST /login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                         b"Content-Type: application/x-www-form-urlencoded\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body[:5])
            time.sleep(1.0)  # the request is inside Django now, reading its body
            sigterm(web)
            time.sleep(1.0)
            conn.sendall(body[5:])
            response = conn.recv(200)
        assert response.startswith(b"HTTP/1.1 "), response
        assert web.popen.wait(40) == 0, web.output()[-3000:]
    finally:
        web.stop()


def test_housekeeping_beat_stops_cleanly(tmp_path):
    beat = start_procfile_process(tmp_path, "housekeeping")
    try:
        wait_for(lambda: "beat: Starting" in beat.output() or "Scheduler: Sending" in beat.output(), timeout=120,
                 message="beat to start")
        sigterm(beat)
        try:
            code = beat.popen.wait(60)
        except subprocess.TimeoutExpired:
            pytest.fail("beat did not stop within 60 s of SIGTERM:\n" + beat.output()[-6000:])
        assert code == 0, beat.output()[-3000:]
    finally:
        beat.stop()


def _answers(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as conn:
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return conn.recv(20).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def test_honcho_stops_every_procfile_process_cleanly(tmp_path, make_tenant):
    """``make run`` and self-hosters run the Procfile under honcho: one SIGTERM (or Ctrl-C)
    must stop every process gracefully, none left behind."""
    procfile = tmp_path / "Procfile"
    procfile.write_text("".join(f"{name}: {procfile_command(name)}\n"
                                for name in ("web", "scheduler", "worker_enterprise", "housekeeping")))
    port = free_port()
    env = process_env(PORT=port, WEB_CONCURRENCY=1, WORKER_CONCURRENCY=2)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    honcho = Process([str(Path(sys.executable).parent / "honcho"), "start", "-f", str(procfile), "-d", "."],
                     env, tmp_path / "honcho.log")
    try:
        # "ready" is the worker's line; the web process counts as started only once it answers:
        # a SIGTERM while granian is still spawning its worker hits granian's own start-up race
        # (seen in CI: the worker started after "Shutting down" and outlived honcho's 5 s grace),
        # which is not the shutdown this test checks.
        wait_for(lambda: "ready" in honcho.output() and "beat: Starting" in honcho.output()
                 and _answers(port), timeout=120, message="every process to start")
        sigterm(honcho)
        honcho.popen.wait(90)
    finally:
        honcho.stop()
    output = honcho.output()
    for name in ("web", "scheduler", "worker_enterprise", "housekeeping"):
        # honcho runs each command through sh, which SIGTERM ends (rc=-15); what matters
        # is that the process inside stopped by itself, before honcho's SIGKILL.
        assert f"{name}.1 stopped" in output, output[-4000:]
    assert "SIGKILL" not in output and "sending kill" not in output.lower(), output[-4000:]
    for clean_stop in ("Granian shutdown completed", "Warm shutdown", "scheduler: stopped"):
        assert clean_stop in output, output[-4000:]
