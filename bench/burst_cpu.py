"""CPU per delivered run, per process class, while bench_scheduler.py's burst drains.

Run it beside bench_scheduler.py (same DATABASE_URL): it waits until the burst's runs
appear (more than ``--start-after`` executions), reads every process's CPU from /proc
(bench/proccpu.py), waits until no run is queued or running (and more than ``--end-after``
exist, or the worker is gone), reads again, and prints, per delivered run (runs that became ``succeeded``
meanwhile): the worker (the Celery command line of ``--worker-tag``, pool children
included), the scheduler, PostgreSQL (the database's backends; its WAL writer, background
writer and checkpointer apart), the Redis on ``--redis-port`` and the local sink; and the
transactions committed per run. Prints figures only, never passes or fails.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_x_bench REDIS_URL=redis://127.0.0.1:6419/17 \\
        SECRET_KEY=bench .venv/bin/python bench/bench_scheduler.py --sizes 100000 --procs 1 ... &
    .venv/bin/python bench/burst_cpu.py --db cronsvc_x_bench --redis-port 6419 --label main

CPU per run is what a busy shared machine moves least (bench/README.md, "Reading the
figures"); the seconds printed are the drain's, from the first runs seen to the last.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import proccpu  # bench/ is not a package: found by the path above


def processes():
    """{pid: (command line, CPU seconds)} of every process."""
    return {pid: (command, ticks / proccpu.TICK) for pid, (command, ticks, _) in proccpu.processes().items()}


def classify(command, args):
    if "celery" in command and " worker " in command and args.worker_tag in command:
        return "worker"
    if "run_scheduler" in command:
        return "scheduler"
    if command.startswith("postgres: ") and f" {args.db} " in command:
        return "postgres"
    if command.startswith("postgres: ") and any(k in command for k in ("walwriter", "background writer",
                                                                        "checkpointer")):
        return "postgres_background"
    if "redis-server" in command and f":{args.redis_port}" in command:
        return "redis"
    if "--serve-target" in command:
        return "sink"
    return None


def psql(db, sql):
    result = subprocess.run(["psql", "-h", "127.0.0.1", "-U", "postgres", "-d", db, "-Atc", sql],
                            capture_output=True, text=True, check=True)
    return result.stdout.strip()


def count(db, sql):
    text = psql(db, sql)
    return [int(value) for value in text.split("|")] if text else None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True, help="the bench database's name")
    parser.add_argument("--redis-port", type=int, default=6419)
    parser.add_argument("--worker-tag", default="n100000", help="text of the worker's command line (its hostname)")
    parser.add_argument("--start-after", type=int, default=5000)
    parser.add_argument("--end-after", type=int, default=90000)
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    if "bench" not in args.db:
        parser.error("the database's name must contain 'bench'")
    while (count(args.db, "SELECT count(*) FROM executions_execution") or [0])[0] <= args.start_after:
        time.sleep(0.2)
    started, before = time.time(), processes()
    succeeded = "SELECT count(*) FROM executions_execution WHERE status = 'succeeded'"
    commits = "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
    (done0,), (commits0,) = count(args.db, succeeded), count(args.db, commits)
    after = dict(before)
    while time.time() - started < args.timeout:
        time.sleep(1)
        now = processes()
        after.update(now)  # a process that ends (the bench stopping its worker) keeps its last reading
        # (an EXISTS while runs wait, the count only then: a count every second took 33-65 ms
        # of PostgreSQL's CPU from the drain it measures)
        pending = count(args.db, "SELECT (EXISTS (SELECT 1 FROM executions_execution "
                                 "WHERE status IN ('queued', 'running')))::int")
        if pending == [0] and count(args.db, "SELECT count(*) FROM executions_execution")[0] > args.end_after:
            break
        if not any(classify(command, args) == "worker" for command, _ in now.values()):
            break  # the bench stopped waiting for the burst
    ended = time.time()
    after.update(processes())
    (done1,), (commits1,) = count(args.db, succeeded), count(args.db, commits)
    runs = max(1, done1 - done0)
    used = {}
    for pid, (command, cpu) in after.items():
        kind = classify(command, args)
        if kind:
            earlier = before.get(pid)
            used[kind] = used.get(kind, 0.0) + cpu - (earlier[1] if earlier and earlier[0] == command else 0.0)
    figures = ", ".join(f"{kind} {1000 * seconds / runs:.3f}" for kind, seconds in sorted(used.items()))
    print(f"{args.label} {done1 - done0} runs in {ended - started:.1f} s; CPU ms a run: {figures}; "
          f"total {1000 * sum(used.values()) / runs:.3f}; commits a run {(commits1 - commits0) / runs:.3f}; "
          f"load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
