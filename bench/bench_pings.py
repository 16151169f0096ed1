"""Ping endpoint benchmark (issue 22: "a ping endpoint answers in under 5 ms p95 at 500
pings/s on this machine"). The web process runs exactly as the Procfile's ``web`` line, in
server mode on PostgreSQL and Redis; an open-loop load paces pings over many monitors.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_bench_pings \\
    REDIS_URL=redis://127.0.0.1:6379/11 SECRET_KEY=bench-only \\
    .venv/bin/python bench/bench_pings.py [--rate 500] [--seconds 10] [--runs 5] [--monitors 2000] [--quick]

Open loop, as wrk2 does it (bench/openloop.py, shared with bench_api.py): ``--connections``
keep-alive connections each send at rate/connections per second on a fixed timetable, and a
request's latency is counted from the time the timetable says it should have been sent, so
a slow answer that delays the next requests is counted against them too (no coordinated
omission). The pings go to random
monitors of ``--monitors`` (half cron, half interval), all up as in a steady state (a
monitor's first ping, new -> up, happens once in its life), 80 % success, 10 % /start with
a rid, 10 % /0 with the same rid (a start/end pair). Each run measures the baseline
(GET /healthz, no database) and then the pings at the same rate, through the same server:
the ratio p95 ping / p95 baseline compares machines. The first second of each run is left
out (connections opening). Figures are the median of ``--runs``.

The database must be one of its own (its name contains "bench"): its monitors and pings
are replaced. The bench tenant is on the enterprise plan, whose monitor limits are lifted in
this database so every ping is counted and none refused. Prints figures; never passes or
fails on a timing. See bench/README.md ("Pings").
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench_api import free_port, machine, start_web, stop  # noqa: E402 - bench/ is on sys.path
from benchenv import log, prepare  # noqa: E402
from openloop import median_of, paced_run  # noqa: E402

BENCH_ORG = "Bench pings"
BENCH_EMAIL = "bench-pings@example.com"
TARGET_P95_MS = 5.0
AGENT = ["User-Agent: bench-pings"]


# --- data --------------------------------------------------------------------------------

def prepare_monitors(count):
    """``count`` monitors of the bench tenant, all up (their pings deleted); returns their ping ids."""
    from django.db import connection
    from django.utils import timezone

    from apps.accounts.models import Organization
    from apps.executions.models import UsageMonth
    from apps.monitors.models import Monitor, Ping
    from apps.plans.models import Plan
    from apps.projects.models import Project
    from apps.projects.provisioning import provision_tenant

    Plan.objects.filter(code="enterprise").update(max_monitors=10**9, monitor_pings_per_minute=10**9,
                                                  monitor_pings_per_month=10**12)
    org = Organization.objects.filter(name=BENCH_ORG).first()
    if org is None:
        org = provision_tenant(org_name=BENCH_ORG, email=BENCH_EMAIL, plan_code="enterprise").organization
    project = Project.objects.filter(organization=org).order_by("created_at").first()
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {Ping._meta.db_table}")
    UsageMonth.objects.filter(organization=org).update(pings=0)
    Monitor.objects.filter(organization=org).delete()
    now = timezone.now()
    expected = now + timedelta(days=1)  # steady state: every monitor up (its first ping is long past)
    Monitor.objects.bulk_create([
        Monitor(organization=org, project=project, name=f"bench monitor {n:05d}", grace_seconds=3600,
                state=Monitor.State.UP, last_ping_at=now, next_expected_at=expected, deadline_at=expected,
                **({"schedule_type": "cron", "cron_expression": "*/5 * * * *"} if n % 2 else
                   {"schedule_type": "interval", "interval_seconds": 300}))
        for n in range(count)
    ], batch_size=1000)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE)")
    return list(Monitor.objects.filter(organization=org).values_list("ping_id", flat=True))


def vacuum_monitors():
    """What autovacuum does to the monitors between runs. Every ping updates its monitor's
    row, and this machine's PostgreSQL runs with autovacuum off (a CI setting; it is on by
    default and on every deployment): without this each run would look its monitors up
    through all the dead row versions of the runs before it, slower run after run."""
    from django.db import connection

    from apps.monitors.models import Monitor

    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM {Monitor._meta.db_table}")


def ping_paths(ping_ids, count, seed):
    """``count`` request paths: random monitors, 80 % success, 10 % start + 10 % end by rid."""
    rng = random.Random(seed)
    paths = []
    while len(paths) < count:
        ping_id = rng.choice(ping_ids)
        if rng.random() < 0.2:
            rid = f"{rng.getrandbits(64):016x}"
            paths += [f"/ping/{ping_id}/start?rid={rid}", f"/ping/{ping_id}/0?rid={rid}"]
        else:
            paths.append(f"/ping/{ping_id}")
    return paths[:count]


# --- report ------------------------------------------------------------------------------

def table(results, runs):
    out = ["| scenario | sent/s | p50 ms | p95 ms | p99 ms | max ms | service p95 ms | errors | load avg |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, cell in results.items():
        out.append(f"| {name} | {cell['rate']:.0f} | {cell['p50']:.2f} | {cell['p95']:.2f} | {cell['p99']:.2f} | "
                   f"{cell['max']:.1f} | {cell['service_p95']:.2f} | {cell['errors']} | {cell['load']:.2f} |")
    pings, base = results["ping"], results["baseline"]
    per_run = ", ".join(f"{run['p95']:.2f}" for run in runs)
    out += ["", f"ping p95 / baseline p95: {pings['p95'] / base['p95']:.2f}; ping p95 of each run: {per_run} ms; "
                f"target p95 < {TARGET_P95_MS:g} ms: {'met' if pings['p95'] < TARGET_P95_MS else '**missed**'}"]
    return "\n".join(out)


def log_cell(name, cell):
    log(f"{name:8} {cell['rate']:5.0f}/s  p50 {cell['p50']:.2f}  p95 {cell['p95']:.2f}  p99 {cell['p99']:.2f}  "
        f"max {cell['max']:.1f} ms  errors {cell['errors']}  load {cell['load']:.2f}")


# --- main --------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=500, help="requests per second (open loop)")
    parser.add_argument("--seconds", type=int, default=10, help="length of each run (the first second left out)")
    parser.add_argument("--runs", type=int, default=5, help="runs (median)")
    parser.add_argument("--monitors", type=int, default=2000, help="monitors the pings are spread over")
    parser.add_argument("--connections", type=int, default=50, help="keep-alive connections")
    parser.add_argument("--quick", action="store_true", help="2 runs of 5 s")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.seconds = 2, 5

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped bench stops its web process too
    prepare("postgres://postgres@127.0.0.1:5432/cronsvc_bench_pings", "redis://127.0.0.1:6379/11")
    ping_ids = prepare_monitors(args.monitors)
    workdir = Path(tempfile.mkdtemp(prefix="bench-pings-"))
    port = free_port()
    logfile = open(workdir / "web.log", "w")
    web, command = start_web(port, logfile)
    log(f"web: {command} (PORT={port}, WEB_CONCURRENCY={os.environ.get('WEB_CONCURRENCY', 'unset')}); "
        f"log {logfile.name}")
    per_run = args.rate * args.seconds
    samples = {"baseline": [], "ping": []}
    try:
        paced_run(port, ping_paths(ping_ids, 3 * args.rate, seed=-1), args.rate, args.connections, headers=AGENT)  # warm-up
        for run in range(args.runs):
            vacuum_monitors()
            for name, paths in (("baseline", ["/healthz"] * per_run),
                                ("ping", ping_paths(ping_ids, per_run, seed=run))):
                cell = paced_run(port, paths, args.rate, args.connections, headers=AGENT)["all"]
                samples[name].append(cell)
                log_cell(name, cell)
    finally:
        stop(web)
        logfile.close()
    results = {name: median_of(runs) for name, runs in samples.items()}
    header = (f"{machine()}; PostgreSQL, Redis and the load generator on the same machine.  \n"
              f"web: `{command}` (WEB_CONCURRENCY={os.environ.get('WEB_CONCURRENCY', f'unset: {os.cpu_count()}')}, "
              f"WEB_THREADS={os.environ.get('WEB_THREADS', 'unset: 2')}).  \n"
              f"{args.rate}/s open loop over {args.connections} connections, {args.monitors} monitors; median of "
              f"{args.runs} runs of {args.seconds} s (first second left out); latency from the scheduled send time; "
              f"service p95 = from the actual send; load avg = 1-minute load average at the end of each run.")
    print()
    print("\n".join([header, "", table(results, samples["ping"])]))


if __name__ == "__main__":
    main()
