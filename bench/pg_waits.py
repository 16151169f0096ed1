"""What PostgreSQL's backends are doing while bench_scheduler.py's burst dispatches: samples.

Run it beside bench_scheduler.py (same database): it waits until the burst's runs appear
(more than ``--start-after`` executions), then reads ``pg_stat_activity`` every
``--interval`` seconds for ``--seconds`` and prints, per (wait event, first words of the
statement), how many times an active backend of the database was seen there (``CPU`` when
it waited for nothing). Counts, not times: a statement seen in half the samples kept one
backend busy half the time on average. Prints figures only, never passes or fails.

    .venv/bin/python bench/pg_waits.py --db cronsvc_x_bench --seconds 10 &
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_x_bench ... \\
        .venv/bin/python bench/bench_scheduler.py --sizes 100000 --procs 2 ...

(bench/README.md, "The scheduler's insert without ON CONFLICT", used it with the defaults.)
"""

import argparse
import collections
import time

import psycopg

_ACTIVE = (
    "SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU'), left(regexp_replace(query, '\\s+', ' ', 'g'), %s) "
    "FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' "
    "AND backend_type = 'client backend' AND pid <> pg_backend_pid()"
)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", required=True, help="the bench database's name")
    parser.add_argument("--start-after", type=int, default=2000, help="executions that mark the burst's start")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=0.02)
    parser.add_argument("--width", type=int, default=40, help="characters of each statement kept")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    if "bench" not in args.db:
        parser.error("the database's name must contain 'bench'")
    with psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{args.db}", autocommit=True) as conn:
        # (a bounded count: cheap while the table is small, and it is until the burst)
        started = f"SELECT count(*) FROM (SELECT 1 FROM executions_execution LIMIT {args.start_after + 1}) s"
        while conn.execute(started).fetchone()[0] <= args.start_after:
            time.sleep(0.01)
        seen, samples, ends = collections.Counter(), 0, time.monotonic() + args.seconds
        while time.monotonic() < ends:
            seen.update(conn.execute(_ACTIVE, [args.width]).fetchall())
            samples += 1
            time.sleep(args.interval)
    print(f"{samples} samples of the active backends of {args.db}, {args.interval * 1000:.0f} ms apart")
    for (wait, statement), count in seen.most_common(args.top):
        print(f"{count:6d}  {wait:28s} {statement}")


if __name__ == "__main__":
    main()
