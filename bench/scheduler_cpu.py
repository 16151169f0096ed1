"""CPU per dispatched occurrence, measured in-process (issue 38): N jobs (bench_scheduler.py's
workload), D of them due at once, drained by one SchedulerLoop in this process (its real
ticks: claim, write, publish to Redis, the tick's other parts), while this script reads

- the scheduler's CPU (this process, its publisher thread included: ``time.process_time``),
- its PostgreSQL backend's CPU (``/proc/<pid>/stat`` of ``pg_backend_pid()``),
- the WAL written (``pg_current_wal_lsn``) and the statements sent (an execute wrapper),

each divided by the occurrences recorded. These figures are what a busy shared machine
moves least (the rate is printed too, with the load average, but it is only as good as the
machine). No worker runs: the messages stay in Redis and are flushed between rounds.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_benchsched_x \\
    REDIS_URL=redis://127.0.0.1:6417/13 SECRET_KEY=bench \\
    .venv/bin/python bench/scheduler_cpu.py --jobs 100000 --rounds 3 [--batch-size 500]

The database must be a benchmark's (its name contains "bench"): its job and execution tables
are emptied. ``--reuse`` keeps the jobs an earlier run of this script loaded.
"""

import argparse
import cProfile
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchenv import log, prepare

CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def backend_cpu(pid):
    """utime + stime of a PostgreSQL backend, in seconds."""
    with open(f"/proc/{pid}/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


def loaded(bench, n):
    """Are the jobs of an earlier run of size ``n`` still there?"""
    try:
        return bench.sql("SELECT count(*) FROM jobs_job", fetch=True)[0][0] == n
    except Exception:  # noqa: BLE001 - bench_job missing and the like: load
        return False


def one_round(bench, due, batch_size, profile=None, backlog_batch_size=None):
    import psycopg

    from apps.executions.scheduling.process import SchedulerLoop

    bench.reset_jobs(due, vacuum=True)
    at = bench.sql("SELECT statement_timestamp() - interval '1 second'", fetch=True)[0][0]
    bench.schedule_jobs(due, "%s::timestamptz", [at])
    bench.autocommit_sql("CHECKPOINT")
    # (the keyword only when given: the tree before issue 38's change has no such argument)
    loop = SchedulerLoop(batch_size=batch_size, **({"backlog_batch_size": backlog_batch_size}
                                                   if backlog_batch_size else {}))
    pid = bench.sql("SELECT pg_backend_pid()", fetch=True)[0][0]
    wal_start = bench.sql("SELECT pg_current_wal_lsn()", fetch=True)[0][0]
    statements = [0]
    execute = psycopg.Cursor.execute

    def counted(cursor, *args, **kwargs):  # Django's cursors and the tick's binding cursors alike
        statements[0] += 1
        return execute(cursor, *args, **kwargs)

    cpu, pg, wall = time.process_time(), backend_cpu(pid), time.monotonic()
    psycopg.Cursor.execute = counted
    profiler = cProfile.Profile() if profile else None
    try:
        if profiler:
            profiler.enable()
        while loop.tick():
            pass
    finally:
        psycopg.Cursor.execute = execute
        if profiler:
            profiler.disable()
            profiler.dump_stats(profile)
    cpu, pg, wall = time.process_time() - cpu, backend_cpu(pid) - pg, time.monotonic() - wall
    if bench.sql("SELECT pg_backend_pid()", fetch=True)[0][0] != pid:
        sys.exit("the scheduler's connection was replaced during the round: its backend's CPU is lost")
    wal = bench.sql("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)", [wal_start], fetch=True)[0][0]
    recorded = bench.sql("SELECT count(*) FROM executions_execution WHERE scheduled_for <= %s", [at],
                         fetch=True)[0][0]
    left = bench.sql("SELECT count(*) FROM jobs_jobdue WHERE next_run_at <= %s", [at], fetch=True)[0][0]
    return {"recorded": recorded, "left": left, "wall": wall, "cpu_us": cpu / recorded * 1e6,
            "pg_us": pg / recorded * 1e6, "wal_bytes": float(wal) / recorded, "statements": statements[0] / recorded,
            "load": os.getloadavg()[0]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--due", type=int, default=None, help="jobs due at once (default: every enabled job)")
    parser.add_argument("--batch-size", type=int, default=None, help="SCHEDULER_BATCH_SIZE (default: the setting)")
    parser.add_argument("--backlog-batch-size", type=int, default=None,
                        help="SCHEDULER_BACKLOG_BATCH_SIZE (default: the setting, where the tree has it)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", help="cProfile the ticks of the last round into this file (slower: CPU "
                        "figures of that round are not comparable)")
    parser.add_argument("--reuse", action="store_true", help="keep the jobs loaded by an earlier run")
    args = parser.parse_args()
    prepare("postgres://postgres@127.0.0.1:5432/cronsvc_benchsched_cpu", "redis://127.0.0.1:6417/13",
            OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", CONN_MAX_AGE="3600")  # one backend a round
    import bench_scheduler as bench
    from django.conf import settings

    broker = bench.Broker(os.environ["REDIS_URL"])
    if not (args.reuse and loaded(bench, args.jobs)):
        log(f"loading {args.jobs:,} jobs")
        bench.load_jobs(args.jobs, "http://127.0.0.1:9/sink")
    from cronsvc.gc_tuning import freeze_startup_objects
    freeze_startup_objects()  # as manage.py run_scheduler does before its loop
    enabled = bench.sql("SELECT count(*) FROM bench_job", fetch=True)[0][0]
    due = min(enabled, args.due or enabled)
    batch_size = args.batch_size or settings.SCHEDULER_BATCH_SIZE
    results = []
    for number in range(1, args.rounds + 1):
        broker.flush()
        result = one_round(bench, due, batch_size, args.profile if number == args.rounds else None,
                           args.backlog_batch_size)
        broker.flush()
        results.append(result)
        log(f"round {number}: batch {batch_size}, {result['recorded']:,} recorded ({result['left']} left) in "
            f"{result['wall']:.2f} s = {result['recorded'] / result['wall']:,.0f}/s; scheduler CPU "
            f"{result['cpu_us']:.1f} us/job, PostgreSQL CPU {result['pg_us']:.1f} us/job, WAL "
            f"{result['wal_bytes']:,.0f} B/job, statements {result['statements']:.4f}/job, load {result['load']:.1f}")
    median = {key: statistics.median(r[key] for r in results) for key in ("cpu_us", "pg_us", "wal_bytes")}
    print(f"median of {len(results)}: batch {batch_size}, due {due:,}: scheduler CPU {median['cpu_us']:.1f} us/job, "
          f"PostgreSQL CPU {median['pg_us']:.1f} us/job, together {median['cpu_us'] + median['pg_us']:.1f} us/job, "
          f"WAL {median['wal_bytes']:,.0f} B/job", flush=True)


if __name__ == "__main__":
    main()
