"""`cronsvc executions list|show|tail`: the history through cursor pages, and tail following
runs that a real Celery worker delivers to a local endpoint."""

import json
import queue
import re
import signal
import subprocess
import threading
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions.models import Execution
from apps.jobs.models import Job
from tests.support.broker import use_private_queue
from tests.support.processes import start_worker, wait_for

from .conftest import CRONSVC, LOCAL_TARGETS

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def history(job, statuses):
    """Finished runs of ``job``, one a minute, the newest first as the API lists them."""
    start = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    runs = [Execution.objects.create(job=job, organization=job.organization, scheduled_for=start + timedelta(minutes=i),
                                     status=status, finished_at=start + timedelta(minutes=i, seconds=1))
            for i, status in enumerate(statuses)]
    return [str(run.pk) for run in reversed(runs)]


def test_list_follows_cursor_pages_newest_first(cli, client_tenant, make_job, web):
    job = make_job(client_tenant)
    ids = history(job, ["succeeded", "failed", "succeeded", "succeeded", "failed"])

    listed = []
    requests = web.requests_during(
        lambda: listed.extend(cli.ok("executions", "list", "--job", job.pk, "--page-size", "2", "--limit", "0",
                                     "-o", "json")), "/api/v1/executions/")
    assert [run["id"] for run in listed] == ids
    assert requests == 3  # 2 + 2 + 1, through the cursors of the next links

    assert [r["id"] for r in cli.ok("executions", "list", "--job", job.pk, "--limit", "3", "-o", "json")] == ids[:3]
    failed = cli.ok("executions", "list", "--job", job.pk, "--status", "failed", "-o", "json")
    assert [run["id"] for run in failed] == [ids[0], ids[3]]
    since = listed[1]["scheduled_for"]
    assert [r["id"] for r in cli.ok("executions", "list", "--since", since, "-o", "json")] == ids[:2]

    table = cli.ok("executions", "list", "--job", job.pk).out.splitlines()
    assert re.split(r"\s{2,}", table[0]) == ["ID", "JOB", "SCHEDULED FOR", "TRIGGER", "STATUS", "ATTEMPT", "HTTP",
                                             "MS"]
    assert [row.split()[0] for row in table[1:]] == ids


def test_an_unknown_status_is_refused_by_the_api(cli):
    refused = cli("executions", "list", "--status", "exploded")
    assert refused.code == 1 and refused.err.startswith("Error: invalid_choice (HTTP 400)")


def test_another_tenants_runs_are_neither_listed_nor_shown(cli, other_tenant, make_job):
    (theirs,) = history(make_job(other_tenant), ["succeeded"])
    assert cli.ok("executions", "list", "-o", "json") == []
    shown = cli("executions", "show", theirs)
    assert shown.code == 4 and "not_found" in shown.err


class Tail:
    """`cronsvc executions tail` running; its stdout lines read by a thread."""

    def __init__(self, cli, *args):
        self.process = subprocess.Popen([str(CRONSVC), "executions", "tail", *map(str, args)], env=cli.environment(),
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.seen = []

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))

    def until(self, predicate, timeout=60, message="lines"):
        def arrived():
            while not self.lines.empty():
                self.seen.append(self.lines.get())
            return predicate(self.seen)
        wait_for(arrived, timeout=timeout, interval=0.1, message=f"{message}; seen {self.seen}")
        return self.seen

    def interrupt(self):
        """Ctrl-C: the way to stop tail, not an error."""
        self.process.send_signal(signal.SIGINT)
        code = self.process.wait(timeout=15)
        return code, self.process.stderr.read()


def statuses_by_run(lines):
    runs = {}
    for run in map(json.loads, lines):
        runs.setdefault(run["id"], []).append(run["status"])
    return runs


def test_tail_follows_runs_a_real_worker_delivers(cli, client_tenant, tmp_path, target):
    plan_queue = use_private_queue(client_tenant)
    worker = start_worker(tmp_path, [plan_queue], concurrency=1, **LOCAL_TARGETS)
    job_id = cli.ok("jobs", "create", "--name", "tailed", "--cron", "0 3 * * *", "--url", target.url("/tailed"),
                    "-o", "json")["id"]
    (old,) = history(Job.objects.get(pk=job_id), ["failed"])
    tail = Tail(cli, "--job", job_id, "--interval", "0.3", "--lines", "1", "-o", "json")
    try:
        tail.until(lambda lines: lines, message="the backlog")
        assert json.loads(tail.seen[0])["id"] == old  # the last run first (--lines 1)

        triggered = [cli.ok("jobs", "trigger", job_id, "-o", "json")["id"] for _ in range(2)]

        def both_succeeded(lines):
            runs = statuses_by_run(lines)
            return all(runs.get(run, [""])[-1] == "succeeded" for run in triggered)

        tail.until(both_succeeded, timeout=90, message="both triggered runs to succeed")
    finally:
        code, err = tail.interrupt()
        worker.stop()
    assert code == 0, err
    runs = statuses_by_run(tail.seen)
    assert set(runs) == {old, *triggered}
    for run in triggered:  # each change once, in order: (queued) (running) succeeded
        assert runs[run] == sorted(set(runs[run]), key=["queued", "running", "succeeded"].index), runs
    assert len(target.requests_to("/tailed")) == 2

    shown = cli.ok("executions", "show", triggered[0], "-o", "json")
    assert shown["status"] == "succeeded" and shown["response"]["status"] == 200
    assert [attempt["outcome"] for attempt in shown["attempts"]] == ["succeeded"]
    table = cli.ok("executions", "show", triggered[0]).out
    assert re.search(r"^status\s+succeeded$", table, re.M)


def test_tail_prints_a_table_when_asked_for_one(cli, client_tenant, make_job):
    job = make_job(client_tenant)
    ids = history(job, ["succeeded", "failed"])
    tail = Tail(cli, "--job", job.pk, "--interval", "0.3")
    try:
        lines = tail.until(lambda lines: len(lines) >= 3, message="the header and two runs")
    finally:
        code, err = tail.interrupt()
    assert code == 0, err
    assert lines[0].split()[:2] == ["ID", "JOB"]
    assert [line.split()[0] for line in lines[1:]] == list(reversed(ids))  # oldest first, as a log
