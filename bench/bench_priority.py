"""Priority under overload (issue 22): dispatch lag of high-priority runs while the plan's
queue holds a backlog of low-priority runs, against the same measure with an empty queue
(the baseline), with a real scheduler and a real Celery worker on PostgreSQL and Redis.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_priority_bench \\
    REDIS_URL=redis://127.0.0.1:6379/11 SECRET_KEY=bench \\
    .venv/bin/python bench/bench_priority.py [--backlog 50000] [--repeat 3] [--high 80] [--spread 20]

Each run: the executions table is emptied and the Redis index flushed; ``--backlog`` queued
low runs are published to the plan's ``--low`` sub-queue (in messages of
publishing.LOW_PRIORITY_CHUNK runs, as the scheduler sends them); a worker (the Procfile's line: ``<plan>--high,<plan>,<plan>--low``, prefork,
concurrency 4) and a scheduler start; ``--high`` one-off high-priority jobs come due spread
over ``--spread`` seconds. Lag = the run's ``started_at`` (the worker claimed it) minus its
due time. The endpoint is a local HTTP server answering 200 at once. The database must be
a database of its own (its name must contain "bench"); the Redis index must not be 0.
Prints figures only; it never passes or fails on a timing.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchenv import log, prepare  # noqa: E402 - bench/ is on sys.path: run as a script

PLAN_QUEUE = "runs.enterprise"
LOW_JOBS = 500  # the backlog's runs belong to this many low-priority jobs
TARGET = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def _ok(self):
        self.send_response(200); self.send_header("Content-Length", "2"); self.end_headers(); self.wfile.write(b"ok")
    do_GET = do_POST = _ok
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer.daemon_threads = True
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backlog", type=int, default=50_000, help="low runs waiting in the queue")
    parser.add_argument("--repeat", type=int, default=3, help="runs per case (median of their p99)")
    parser.add_argument("--high", type=int, default=80, help="high-priority runs per run")
    parser.add_argument("--spread", type=float, default=20.0, help="seconds over which they come due")
    parser.add_argument("--republish-after", type=int, default=3600, help=(
        "SWEEPER_REPUBLISH_AFTER for the scheduler: with the default 60 s, queued runs published over a minute "
        "ago (the backlog) are published again, 1000 a sweep, which the scheduler pays for"))
    parser.add_argument("--worker-nice", type=int, default=0, help=(
        "run the worker at this nice level: on a 2-core machine the busy worker otherwise takes the CPU the "
        "scheduler needs, where a deployment gives the worker fleet machines of its own"))
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("stopped"))  # the finally blocks stop the processes
    _db_url, db_name, redis_url = prepare("postgres://postgres@127.0.0.1:5432/cronsvc_priority_bench",
                                          "redis://127.0.0.1:6379/11", OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8")
    from bench_scheduler import CpuMeter

    world = _world()
    port = _free_port()
    target = subprocess.Popen([sys.executable, "-c", TARGET, str(port)])
    cases = {"empty queue (baseline)": 0, f"{args.backlog:,} low runs queued": args.backlog}
    results = {name: [] for name in cases}
    try:
        for index in range(args.repeat):
            for name, backlog in cases.items():
                meter = CpuMeter(db_name)
                result = _one_run(world, port, backlog, args, meter)
                results[name].append(result)
                log(f"run {index + 1} {name}: p50 {result['p50'] * 1000:.0f} ms, p99 {result['p99'] * 1000:.0f} ms, "
                    f"max {result['max'] * 1000:.0f} ms (scheduler's part p99 {result['claim_p99'] * 1000:.0f} ms); low runs still queued at the end "
                    f"{result['low_left']:,}; load {result['load']:.2f}, other load {result['foreign']:.0%}")
    finally:
        target.terminate()
        target.wait(5)
    _report(results, args)


def _world():
    from apps.accounts.models import Organization
    from apps.jobs.models import Job
    from apps.projects.models import Project
    from apps.projects.provisioning import provision_tenant

    organization = Organization.objects.filter(name="priority bench").first()
    if organization is None:
        organization = provision_tenant(org_name="priority bench", email="bench@example.com",
                                        plan_code="enterprise").organization
    assert organization.plan.queue == PLAN_QUEUE, organization.plan.queue
    project = Project.objects.filter(organization=organization).first()
    return {"organization": organization, "project": project, "Job": Job}


def _one_run(world, port, backlog, args, meter):
    import redis
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from apps.executions.scheduling import publishing
    from apps.executions.models import Execution

    Job = world["Job"]
    with connection.cursor() as cursor:
        cursor.execute("TRUNCATE executions_execution, executions_attempt")
    Job.objects.filter(organization=world["organization"]).delete()
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()
    url = f"http://127.0.0.1:{port}/"
    # The backlog, of many jobs as a real one would be (one job's runs all write its row),
    # or one low run that tells when the worker is up (the baseline).
    low_jobs = Job.objects.bulk_create(
        Job(project=world["project"], organization=world["organization"], name=f"low {i}", cron_expression="0 0 1 1 *",
            url=url, priority="low", next_run_at=None) for i in range(LOW_JOBS))
    start = timezone.now() - timedelta(hours=24)
    rows = Execution.objects.bulk_create(
        (Execution(job=low_jobs[i % LOW_JOBS], organization=world["organization"], queue=f"{PLAN_QUEUE}--low",
                   scheduled_for=start + timedelta(seconds=i), published_at=timezone.now())
         for i in range(max(1, backlog))), batch_size=5000)
    publishing.publish({f"{PLAN_QUEUE}--low": [row.id for row in rows]})
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "SWEEPER_REPUBLISH_AFTER": str(args.republish_after),
           # The Procfile's line names `celery`: the virtualenv's, as honcho run from it would find.
           "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"}
    nice = f"nice -n {args.worker_nice} " if args.worker_nice else ""
    logs = {name: tempfile.NamedTemporaryFile(prefix=f"bench-priority-{name}-", suffix=".log", delete=False)
            for name in ("worker", "scheduler")}
    worker = subprocess.Popen(["sh", "-c", f"exec {nice}" + _procfile("worker_enterprise")], cwd=ROOT, env=env,
                              stdout=logs["worker"], stderr=subprocess.STDOUT, start_new_session=True)
    scheduler = subprocess.Popen([sys.executable, "manage.py", "run_scheduler", "--max-sleep", "0.2"], cwd=ROOT,
                                 env=env, stdout=logs["scheduler"], stderr=subprocess.STDOUT, start_new_session=True)
    try:
        ready_by = time.monotonic() + 120
        while not Execution.objects.filter(job__in=low_jobs, started_at__isnull=False).exists():
            if time.monotonic() > ready_by:
                raise SystemExit("the worker took no run in 120 s; logs: " + ", ".join(f.name for f in logs.values()))
            time.sleep(0.2)
        time.sleep(1)  # the scheduler is up too (it started first)
        first_due = timezone.now() + timedelta(seconds=2)
        step = args.spread / max(1, args.high - 1)
        highs = [Job(project=world["project"], organization=world["organization"], name=f"high {i}",
                     schedule_type="once", run_at=first_due + timedelta(seconds=i * step), cron_expression="",
                     url=url, priority="high", next_run_at=first_due + timedelta(seconds=i * step))
                 for i in range(args.high)]
        Job.objects.bulk_create(highs)
        meter.start(pids=_descendants([worker.pid, scheduler.pid]))
        load_before = os.getloadavg()[0]
        deadline = time.monotonic() + args.spread + 60
        high_runs = Execution.objects.filter(job__in=highs)
        while time.monotonic() < deadline and high_runs.filter(started_at__isnull=False).count() < args.high:
            time.sleep(0.5)
        foreign = meter.foreign_share(pids=_descendants([worker.pid, scheduler.pid]))
        load = max(load_before, os.getloadavg()[0])
        low_left = Execution.objects.filter(job__in=low_jobs, started_at__isnull=True).count() if backlog else 0
    finally:
        for process in (scheduler, worker):
            os.killpg(process.pid, signal.SIGTERM)
        for process in (scheduler, worker):
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
    times = list(high_runs.values_list("started_at", "scheduled_for", "published_at"))
    lags = sorted((started - scheduled).total_seconds() for started, scheduled, _ in times if started)
    # The scheduler's part (due -> claimed and published); the rest is the wait in the queue.
    claims = sorted((published - scheduled).total_seconds() for _, scheduled, published in times if published)
    if len(lags) < args.high:
        log(f"  only {len(lags)} of {args.high} high runs started in time; the missing count as the deadline")
        lags += [args.spread + 60.0] * (args.high - len(lags))
    return {"p50": statistics.median(lags), "p99": _quantile(lags, 0.99), "max": lags[-1], "low_left": low_left,
            "claim_p99": _quantile(claims, 0.99) if claims else float("nan"),
            "load": load, "foreign": foreign}


def _quantile(values, q):
    return values[min(len(values) - 1, int(q * len(values)))]


def _descendants(pids):
    """The given processes and all their children (the worker's prefork pool)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as handle:
                    stat = handle.read()
            except OSError:
                continue
            parents[int(entry)] = int(stat[stat.rindex(b")") + 2:].split()[1])
    found, frontier = set(pids), list(pids)
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parents.items() if ppid == parent and pid not in found]
        found.update(children)
        frontier.extend(children)
    return found


def _procfile(name):
    for line in (ROOT / "Procfile").read_text().splitlines():
        key, _, command = line.partition(":")
        if key.strip() == name:
            return re.sub(r"\$\{WORKER_CONCURRENCY:-(\d+)\}", r"\1", command.strip())
    raise KeyError(name)


def _free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _report(results, args):
    print()
    print(f"cronsvc priority benchmark — {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    print(f"{args.high} high-priority runs due over {args.spread:.0f} s per run, {args.repeat} runs per case; "
          f"lag = started_at - due time; median over runs; worker nice {args.worker_nice}; "
          f"SWEEPER_REPUBLISH_AFTER={args.republish_after}")
    print()
    print("| queue holds | high lag p50 | high lag p99 (median) | p99 of each run | high lag max | "
          "scheduler's part p99 | low runs still queued at the end | load avg (1 min) | other load |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for name, runs in results.items():
        p99s = [r["p99"] for r in runs]
        print(f"| {name} | {statistics.median(r['p50'] for r in runs) * 1000:.0f} ms | "
              f"**{statistics.median(p99s) * 1000:.0f} ms** | {', '.join(f'{p * 1000:.0f}' for p in p99s)} ms | "
              f"{max(r['max'] for r in runs) * 1000:.0f} ms | "
              f"{statistics.median(r['claim_p99'] for r in runs) * 1000:.0f} ms | "
              f"{statistics.median(r['low_left'] for r in runs):,.0f} | "
              f"{statistics.median(r['load'] for r in runs):.2f} | {statistics.median(r['foreign'] for r in runs):.0%} |")


if __name__ == "__main__":
    main()
