"""The Python CPU of a scheduler tick's batch processing, without the database's share or
its waits (issue 38): the claimed rows of D due jobs are read once, then ``_process_batch``
runs on them in batches of 2,000 (SCHEDULER_BACKLOG_BATCH_SIZE) with the write statement
converted and dumped by psycopg, as it would be sent, but not executed. What the figure
covers: the outcomes (due scan, misfire plan, windows, queue, rows), the ids and the write's
parameters. ``time.process_time`` per job; several repetitions, their minimum and median.

Needs the jobs of ``bench/scheduler_cpu.py`` (run it once first); makes D of them due now
(the database must be a benchmark's: nothing else may run on it meanwhile).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_benchsched_cpu SECRET_KEY=bench \\
    .venv/bin/python bench/tick_python_cpu.py [--due 20000] [--repeat 7]
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchenv import log, prepare


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--due", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    prepare("postgres://postgres@127.0.0.1:5432/cronsvc_benchsched_cpu", "redis://127.0.0.1:6417/13",
            CONN_MAX_AGE="3600")
    import bench_scheduler as bench
    from django.db import connection, transaction
    from psycopg._queries import PostgresQuery
    from psycopg.adapt import Transformer

    from apps.executions import queries
    from apps.executions.scheduling import tick
    from apps.jobs.models import JobDue
    from apps.sql import bulk
    from apps.sql import clock as database_clock
    from cronsvc.gc_tuning import freeze_startup_objects

    freeze_startup_objects()  # as manage.py run_scheduler does before its loop
    bench.reset_jobs(args.due, vacuum=False)
    now = database_clock.reading().at
    bench.schedule_jobs(args.due, "%s::timestamptz", [now])
    with transaction.atomic():
        rows = tick._fetch(JobDue.objects.filter(next_run_at__isnull=False, next_run_at__lte=now)
                           .order_by("next_run_at")[:args.due])
    jobs = [tick.ClaimedJob._make(row) for row in rows]
    bench.reset_jobs(args.due, vacuum=False)  # not due any more
    connection.ensure_connection()
    if hasattr(bulk, "_register"):  # (a tree without it sends lists)
        bulk._register(connection.connection)
    transformer = Transformer(connection.connection)

    def dumped_not_sent(sql, params):
        query = PostgresQuery(transformer)
        query.convert(sql, params)
        query.dump(params)
        return set()

    queries._returned_ids = dumped_not_sent
    runs = []
    for _ in range(args.repeat):
        started = time.process_time()
        for start in range(0, len(jobs), 2000):
            tick._process_batch(jobs[start:start + 2000], now, careful=False)
        runs.append((time.process_time() - started) / len(jobs) * 1e6)
    log(f"{len(jobs):,} claimed jobs, batches of 2,000: Python CPU min {min(runs):.1f} us/job, median "
        f"{statistics.median(runs):.1f} us/job (runs {', '.join(f'{run:.1f}' for run in runs)}), load "
        f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
