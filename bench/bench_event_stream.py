"""Event stream benchmark (issue 23): what writing the outbox costs a worker's claim and
its recording of outcomes, stream on vs off in the same run, and what publishing costs,
on real PostgreSQL and Redis.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_bench_events \\
    REDIS_URL=redis://127.0.0.1:6379/12 SECRET_KEY=bench \\
    .venv/bin/python bench/bench_event_stream.py [--runs 400] [--repeat 7]

Each repetition, for EVENT_STREAM off then on: ``runs`` queued executions are claimed by
``apps.executions.worker.batch.claim`` in batches of 100 (one message's worth) and their
successes recorded by ``recording.record_attempts`` in groups of 100, the worker's own
functions (no HTTP: the request is not what is measured). With the stream on, the relay then
publishes the entries (``relay.relay_round``, XADD to a real Redis). Medians over the
repetitions, in microseconds per run. The database's executions, attempts and outbox are
emptied; its name must contain "bench". Prints figures only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchenv import log, prepare  # noqa: E402 - bench/ is on sys.path: run as a script

GROUP = 100


def tenant_and_jobs(count=20):
    from apps.jobs.models import Job
    from apps.projects.provisioning import provision_tenant

    tenant = provision_tenant(org_name=f"Bench events {time.time_ns()}", email="bench-events@example.com",
                              plan_code="enterprise")
    jobs = [Job.objects.create(project=tenant.project, organization=tenant.organization, name=f"j{i}",
                               schedule_type="interval", interval_seconds=3600, cron_expression="",
                               url="https://example.com/") for i in range(count)]
    return tenant, jobs


def one_pass(tenant, jobs, runs, stream_on):
    """(µs per run to claim, µs per run to record, µs per event to publish or None)."""
    from django.conf import settings
    from django.utils import timezone

    from apps.eventstream import relay
    from apps.eventstream.models import OutboxEntry
    from apps.executions.worker import batch, recording
    from apps.executions.models import Execution

    settings.EVENT_STREAM = stream_on
    Execution.objects.all().delete()
    OutboxEntry.objects.all().delete()
    now = timezone.now()
    Execution.objects.bulk_create([
        Execution(job=jobs[i % len(jobs)], organization=tenant.organization, trigger="manual", queue="bench",
                  scheduled_for=now + timedelta(microseconds=i), created_at=now, published_at=now)
        for i in range(runs)])
    ids = list(Execution.objects.values_list("id", flat=True))
    claimed, started = [], time.perf_counter()
    for start in range(0, runs, GROUP):
        claimed += batch.claim(ids[start:start + GROUP], now)
    claim_us = (time.perf_counter() - started) / runs * 1e6
    results = [recording.FinishedAttempt(
        execution=execution, status="succeeded", next_attempt_at=None, auto_disable_after=0,
        attempt=recording.AttemptValues(
            number=1, started_at=now, finished_at=now, duration_ms=12, request_method="GET",
            request_url="https://example.com/", request_headers={}, request_body="", response_status=200,
            response_headers={"content-type": "text/plain"}, response_body="ok", remote_addr="203.0.113.1",
            outcome="succeeded", error_kind="", error_message=""))
        for execution in claimed]
    started = time.perf_counter()
    for start in range(0, len(results), GROUP):
        recording.record_attempts(results[start:start + GROUP])
    record_us = (time.perf_counter() - started) / runs * 1e6
    publish_us = None
    if stream_on:
        events = OutboxEntry.objects.count()
        started, sent = time.perf_counter(), 0
        while True:
            done = relay.relay_round()
            if not done:
                break
            sent += done
        publish_us = (time.perf_counter() - started) / max(sent, 1) * 1e6
        assert sent == events == 2 * runs, (sent, events)
    return claim_us, record_us, publish_us


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=400, help="executions per pass")
    parser.add_argument("--repeat", type=int, default=7, help="passes per mode (median)")
    args = parser.parse_args()
    _, db_name, redis_url = prepare("postgres://postgres@127.0.0.1:5432/cronsvc_bench_events",
                                    "redis://127.0.0.1:6379/12", refused_dbs=("cronsvc_bench",))
    from django.conf import settings

    import redis

    settings.EVENT_STREAM_REDIS_URL = redis_url
    settings.EVENT_STREAM_PREFIX = "bench-events"
    tenant, jobs = tenant_and_jobs()
    figures = {False: [], True: []}
    for repetition in range(args.repeat):
        for stream_on in (False, True):  # alternated: load drifting over the run hits both alike
            figures[stream_on].append(one_pass(tenant, jobs, args.runs, stream_on))
        log(f"pass {repetition + 1}/{args.repeat}: off {figures[False][-1][:2]}, on {figures[True][-1]}")
    redis.Redis.from_url(redis_url).delete(f"bench-events:org:{tenant.organization.id}")

    def median(mode, index):
        return statistics.median(f[index] for f in figures[mode])

    print(f"\nevent stream cost, {args.runs} runs per pass, {args.repeat} passes per mode, median µs per run "
          f"(database {db_name})\n")
    print("| step | stream off | stream on | cost of the stream |")
    print("|---|---:|---:|---:|")
    for index, step in ((0, "claim (queued -> running), batches of 100"),
                        (1, "record outcome (running -> succeeded), groups of 100")):
        off, on = median(False, index), median(True, index)
        print(f"| {step} | {off:.0f} | {on:.0f} | {on - off:+.0f} ({(on - off) / off * 100:+.0f} %) |")
    print(f"| publish (relay: number, XADD, delete), per event | - | {median(True, 2):.0f} | |")


if __name__ == "__main__":
    main()
