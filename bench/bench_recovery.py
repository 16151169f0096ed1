"""Recovery benchmark (issue 34, "Recovery in seconds"): how long after a worker process is
SIGKILLed with 500 runs in flight until every one of them is final, another worker having
taken them over. Real PostgreSQL, Redis, ``celery -A config worker`` processes, a scheduler
(``manage.py run_scheduler``: its sweeper takes the expired leases back) and a local target.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_bench_recovery \\
    REDIS_URL=redis://127.0.0.1:6379/14 SECRET_KEY=bench OUTBOUND_ALLOWED_NETWORKS=127.0.0.0/8 \\
    .venv/bin/python bench/bench_recovery.py [--runs 500] [--repeat 3]

One round: worker A starts alone, 500 runs are published, and A sends them all to the
target, which holds the first request of each ``webhook-id`` for a minute (a slow
endpoint: the runs stay in flight) and answers a repeated one at once. Once the target
holds all 500, worker B starts and is ready; then A's whole process group gets SIGKILL.
The clock runs from the kill until every run is ``succeeded`` (B re-sent it: the target
counts each ``webhook-id`` seen twice). With the defaults (LEASE_SECONDS 10, renewed every
third of it; SWEEPER_INTERVAL 5) the expectation is a lease's remainder (up to 10 s) plus a
sweep's wait (up to 5 s) plus B's claim and request. Prints the median of the rounds; never
passes or fails on a timing. The database's name must contain "bench"; the Redis index is
flushed and must not be 0.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchenv import log, prepare  # noqa: E402 - bench/ is on sys.path: run as a script

HOLD_FIRST_SECONDS = 60.0


def serve_target():
    """HTTP/1.1 keep-alive server: the first request of a webhook-id waits HOLD_FIRST_SECONDS,
    a repeat answers at once; ``/__stats`` returns {"first": n, "repeat": n}."""
    import asyncio
    import json

    seen = set()
    stats = {"first": 0, "repeat": 0}
    ok = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"

    async def handle(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
                length = int(headers.get("content-length", "0") or 0)
                if length:
                    await reader.readexactly(length)
                if path.startswith("/__stats"):
                    body = json.dumps(stats).encode()
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                 + str(len(body)).encode() + b"\r\n\r\n" + body)
                elif path.startswith("/__reset"):
                    seen.clear()
                    stats.update(first=0, repeat=0)
                    writer.write(ok)
                else:
                    webhook_id = headers.get("webhook-id", "")
                    if webhook_id in seen:
                        stats["repeat"] += 1
                    else:
                        seen.add(webhook_id)
                        stats["first"] += 1
                        await asyncio.sleep(HOLD_FIRST_SECONDS)
                    writer.write(ok)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main():
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=4096)
        print(server.sockets[0].getsockname()[1], flush=True)
        await server.serve_forever()

    asyncio.run(main())


def target_get(base_url, path):
    import requests

    return requests.get(base_url + path, timeout=5).json() if path == "/__stats" else requests.get(base_url + path,
                                                                                                      timeout=5)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    prepare("postgres://postgres@127.0.0.1:5432/cronsvc_bench_recovery", "redis://127.0.0.1:6379/14",
            refused_dbs=("cronsvc_bench",), OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8")
    import subprocess

    import bench_delivery as bd
    from django.conf import settings

    from apps.executions.scheduling import publishing
    from apps.jobs.models import Job

    workdir = Path(tempfile.mkdtemp(prefix="bench-recovery-"))
    bd.flush_redis()
    target = subprocess.Popen([sys.executable, __file__, "--serve-target"], stdout=subprocess.PIPE,
                              stderr=open(workdir / "target.log", "ab"), start_new_session=True)
    target_url = f"http://127.0.0.1:{int(target.stdout.readline())}"
    jobs = bd.load_jobs()
    Job.objects.update(url=target_url + "/run", timeout_seconds=120)
    scheduler = bd.Child([sys.executable, "manage.py", "run_scheduler"], bd.child_env(), workdir / "scheduler.log")
    config = bd.WorkerConfig(pool="prefork", concurrency=1, inflight=1000, prefetch=1)
    log(f"LEASE_SECONDS {settings.LEASE_SECONDS}, SWEEPER_INTERVAL {settings.SWEEPER_INTERVAL}, "
        f"{args.runs} runs in flight, {args.repeat} rounds; logs in {workdir}")
    figures = []
    try:
        for round_number in range(1, args.repeat + 1):
            target_get(target_url, "/__reset")
            ids = bd.insert_executions(jobs, args.runs)
            (worker_a,) = bd.start_workers(config, 1, workdir, f"a{round_number}-")
            publishing.publish({bd.QUEUE: ids})
            deadline = time.time() + 120
            while target_get(target_url, "/__stats")["first"] < args.runs:
                if time.time() > deadline:
                    raise RuntimeError(f"worker A did not send every run: {target_get(target_url, '/__stats')}")
                time.sleep(0.2)
            (worker_b,) = bd.start_workers(config, 1, workdir, f"b{round_number}-")
            os.killpg(worker_a.popen.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            worker_a.popen.wait(10)
            deadline = killed_at + 180
            while bd.status_counts().get("succeeded", 0) < args.runs:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"not every run finished: {bd.status_counts()}")
                time.sleep(0.1)
            seconds = time.monotonic() - killed_at
            stats = target_get(target_url, "/__stats")
            figures.append(seconds)
            log(f"round {round_number}: every run final {seconds:.1f} s after the SIGKILL "
                f"(first requests {stats['first']}, repeated with the same webhook-id {stats['repeat']})")
            worker_b.stop()
    finally:
        scheduler.stop()
        os.killpg(target.pid, signal.SIGTERM)
    print(f"recovery after SIGKILL with {args.runs} runs in flight: median {statistics.median(figures):.1f} s "
          f"over {len(figures)} rounds ({', '.join(f'{s:.1f}' for s in figures)} s); goal under 20 s")


if __name__ == "__main__":
    if "--serve-target" in sys.argv:
        serve_target()
    else:
        main()
