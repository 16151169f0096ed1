"""Retention purge benchmark (issue 8, "Retention"): how fast the purge deletes expired
executions (with their attempts) on PostgreSQL, how long each batch holds its locks, and
what a writer recording runs at the same time waits; with ``--archive``, the same again with
each batch archived first to a local moto_server (apps.archives).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_bench_retention \\
    REDIS_URL=redis://127.0.0.1:6379/7 SECRET_KEY=bench-only \\
    .venv/bin/python bench/bench_retention.py [--rows 5000000] [--batch 1000] [--quick] [--archive]

One tenant on a bench plan with 30 days of retention holds ``--rows`` executions (one
attempt each) spread evenly over the last 60 days, so half of them expire. The bench times
(1) the roll-ups of the expired days (apps.executions.usage.rollups, as the purge makes them when
missing), then (2) the purge itself (apps.billing.retention.purge_expired), while a probe
thread inserts and finishes one execution at a time in the same table, like a worker,
and records how long each write waited. The database must be a database of its own (its
name must contain "bench"): its executions are truncated and reloaded on every run.
Prints figures; never passes or fails on a timing. See bench/README.md ("Retention").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchenv import log, prepare  # noqa: E402 - bench/ is on sys.path: run as a script
UTC = timezone.utc
DAYS = 60
RETENTION_DAYS = 30
INSERT_CHUNK = 250_000
BENCH_ORG = "Bench retention"


def prepare_tenant(jobs_count):
    from apps.accounts.models import Organization
    from apps.jobs.models import Job
    from apps.plans.models import Plan
    from apps.projects.models import Project
    from apps.projects.provisioning import provision_tenant

    plan, _ = Plan.objects.update_or_create(code="bench-retention", defaults=dict(
        name="Bench retention", max_jobs=10**6, min_interval_seconds=10, max_timeout_seconds=60, max_attempts=5,
        retention_days=RETENTION_DAYS, max_concurrency=100, monthly_executions=10**9, queue="runs.bench",
        monthly_price_cents=0))
    org = Organization.objects.filter(name=BENCH_ORG).first()
    if org is None:
        org = provision_tenant(org_name=BENCH_ORG, email="bench-retention@example.com", plan_code="enterprise").organization
    Organization.objects.filter(pk=org.pk).update(plan=plan)
    Organization.objects.exclude(pk=org.pk).delete()  # only the bench tenant is purged
    project = Project.objects.filter(organization=org).order_by("created_at").first()
    have = Job.objects.filter(organization=org).count()
    Job.objects.bulk_create([
        Job(organization=org, project=project, name=f"bench job {n:04d}", schedule_type=Job.ScheduleType.CRON,
            cron_expression="* * * * *", url="https://example.com/hooks/bench", enabled=False)
        for n in range(have, jobs_count)])
    org.refresh_from_db()
    return org, [str(pk) for pk in Job.objects.filter(organization=org).values_list("pk", flat=True)[:jobs_count]]


def load(org, job_ids, rows, now):
    """``rows`` executions over the last DAYS days, one attempt each, by INSERT ... SELECT."""
    from django.db import connection

    from apps.executions.models import Attempt, Execution, JobDayStats

    spacing = DAYS * 86400 / rows
    started = time.monotonic()
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {Execution._meta.db_table} CASCADE")
        JobDayStats.objects.all().delete()
        cursor.execute("SET synchronous_commit = off")
        statement, params = _insert_statement(org, job_ids, now, spacing)
        for first in range(0, rows, INSERT_CHUNK):
            cursor.execute(statement, {**params, "first": first, "last": min(rows, first + INSERT_CHUNK) - 1})
        cursor.execute(
            f"INSERT INTO {Attempt._meta.db_table} (execution_id, number, started_at, finished_at, duration_ms, "
            "request_method, request_url, request_headers, request_body, response_status, response_headers, "
            "response_body, remote_addr, outcome, error_kind, error_message) "
            "SELECT id, 1, started_at, finished_at, duration_ms, 'POST', 'https://example.com/hooks/bench', "
            "'{\"User-Agent\": \"cronsvc\"}', '', response_status, '{}', response_body, '93.184.216.34', "
            f"status, error_kind, '' FROM {Execution._meta.db_table}")
        cursor.execute(f"VACUUM (ANALYZE) {Execution._meta.db_table}")
        cursor.execute(f"VACUUM (ANALYZE) {Attempt._meta.db_table}")
    log(f"loaded {rows:,} executions + {rows:,} attempts in {time.monotonic() - started:.0f} s")


def _insert_statement(org, job_ids, now, spacing):
    """Every column the bench does not vary gets the model's own default."""
    from django.db import connection

    from apps.executions.models import Execution

    at = "(%(base)s::timestamptz - g * %(spacing)s * interval '1 second')"
    failed = "g %% 20 = 0"
    varying = {
        "id": "gen_random_uuid()", "job_id": "(%(jobs)s::uuid[])[1 + g %% %(njobs)s]", "organization_id": "%(org)s",
        "scheduled_for": at, "created_at": at, "published_at": at,
        "started_at": f"{at} + interval '150 milliseconds'",
        "finished_at": f"{at} + interval '150 milliseconds' + (50 + (g * 7919) %% 950) * interval '1 millisecond'",
        "duration_ms": "50 + (g * 7919) %% 950",
        "status": f"CASE WHEN {failed} THEN 'failed' ELSE 'succeeded' END", "attempt": "1",
        "queue": "'runs.bench'", "response_status": f"CASE WHEN {failed} THEN 500 ELSE 200 END",
        "response_body": "'{\"ok\": true}'", "error_kind": f"CASE WHEN {failed} THEN 'http_status' ELSE '' END",
    }
    template = Execution()
    columns, values, params = [], [], {}
    for field in Execution._meta.concrete_fields:
        columns.append(field.column)
        if field.column in varying:
            values.append(varying[field.column])
        else:
            name = f"s_{field.column}"
            params[name] = field.get_db_prep_save(field.pre_save(template, add=True), connection)
            values.append(f"CAST(%({name})s AS {field.db_type(connection)})")
    params.update(base=now, spacing=spacing, jobs=job_ids, njobs=len(job_ids), org=org.pk)
    return (f"INSERT INTO {Execution._meta.db_table} ({', '.join(columns)}) "
            f"SELECT {', '.join(values)} FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g"), params


class WriterProbe(threading.Thread):
    """A worker's writes during the purge: insert a run, then finish it, one at a time;
    records each write's latency (what a lock held by the purge would show)."""

    def __init__(self, org, job_id):
        super().__init__(daemon=True)
        self.org, self.job_id, self.latencies, self.stop = org, job_id, [], threading.Event()

    def run(self):
        from django.db import connection

        from apps.executions.models import Execution

        n = 0
        try:
            while not self.stop.is_set():
                n += 1
                started = time.monotonic()
                execution = Execution.objects.create(job_id=self.job_id, organization=self.org, queue="runs.bench",
                                                     scheduled_for=datetime.now(UTC) + timedelta(days=1, microseconds=n))
                Execution.objects.filter(pk=execution.pk).update(status="succeeded", finished_at=datetime.now(UTC))
                self.latencies.append(time.monotonic() - started)
                time.sleep(0.005)
        finally:
            connection.close()


def percentile(values, pct):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(pct / 100 * len(ordered)))] if ordered else 0.0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--batch", type=int, default=1_000)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="200,000 rows (make bench's quick pass)")
    parser.add_argument("--archive", action="store_true",
                        help="also purge with archiving to a local moto_server (after the plain purge, reloaded)")
    args = parser.parse_args()
    if args.quick:
        args.rows = 200_000
    prepare("postgres://postgres@127.0.0.1:5432/cronsvc_bench_retention", "redis://127.0.0.1:6379/7")
    run(args, archive=False)
    if args.archive:
        with moto_bucket() as bucket:
            run(args, archive=bucket)


def moto_bucket():
    """A moto_server process with a bucket, and the settings that point archiving at it."""
    import contextlib
    import socket
    import subprocess

    import boto3
    from django.conf import settings

    @contextlib.contextmanager
    def server():
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        url = f"http://127.0.0.1:{port}"
        process = subprocess.Popen([str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            client = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="bench",
                                  aws_secret_access_key="bench")
            for _ in range(300):
                try:
                    client.create_bucket(Bucket="bench-archives")
                    break
                except Exception:  # noqa: BLE001 - not listening yet
                    time.sleep(0.2)
            settings.ARCHIVE_S3_BUCKET, settings.ARCHIVE_S3_ENDPOINT_URL = "bench-archives", url
            settings.ARCHIVE_S3_ACCESS_KEY_ID = settings.ARCHIVE_S3_SECRET_ACCESS_KEY = "bench"
            settings.ARCHIVE_S3_ADDRESSING_STYLE = "path"
            yield "bench-archives"
        finally:
            settings.ARCHIVE_S3_BUCKET = ""
            process.terminate()
            process.wait(10)

    return server()


def run(args, *, archive):
    from django.db import connection

    from apps.archives.models import Archive

    from apps.billing.retention import _roll_up_missing_days, purge_expired
    from apps.executions.models import Execution

    now = datetime.now(UTC)
    org, job_ids = prepare_tenant(args.jobs)
    load(org, job_ids, args.rows, now)
    Archive.objects.all().delete()
    cutoff = now - timedelta(days=RETENTION_DAYS)
    expired = Execution.objects.filter(organization=org, scheduled_for__lt=cutoff).count()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_total_relation_size('executions_execution'), pg_total_relation_size('executions_attempt')")
        sizes = cursor.fetchone()

    started = time.monotonic()
    days = _roll_up_missing_days(org, (now - timedelta(days=DAYS + 1)).date(), cutoff.date())
    rollup_seconds = time.monotonic() - started
    log(f"roll-ups of {days} expired days in {rollup_seconds:.1f} s")

    probe = WriterProbe(org, job_ids[0])
    probe.start()
    started = time.monotonic()
    report = purge_expired(now=now, batch_size=args.batch)
    purge_seconds = time.monotonic() - started
    probe.stop.set()
    probe.join()
    batches = report.batch_seconds
    print()
    print(f"Retention purge on PostgreSQL, {args.rows:,} executions (+ one attempt each) over {DAYS} days, "
          f"retention {RETENTION_DAYS} days, batch {args.batch:,}"
          + (f", archived first to moto_server (bucket {archive})" if archive else ""))
    print(f"  table sizes before: executions {sizes[0] / 2**20:,.0f} MiB, attempts {sizes[1] / 2**20:,.0f} MiB")
    print(f"  expired: {expired:,}; purged: {report.executions:,} in {report.batches} batches")
    print(f"  roll-ups first: {days} days in {rollup_seconds:.1f} s ({expired / max(rollup_seconds, 1e-9):,.0f} runs/s)")
    print(f"  purge: {purge_seconds:.1f} s, {report.executions / max(purge_seconds, 1e-9):,.0f} executions/s "
          f"(with their attempts)")
    if batches:
        print(f"  per batch (lock hold): median {statistics.median(batches) * 1000:.0f} ms, "
              f"p95 {percentile(batches, 95) * 1000:.0f} ms, max {max(batches) * 1000:.0f} ms")
    if probe.latencies:
        print(f"  concurrent writer ({len(probe.latencies)} insert+finish): median "
              f"{statistics.median(probe.latencies) * 1000:.1f} ms, p99 {percentile(probe.latencies, 99) * 1000:.1f} ms, "
              f"max {max(probe.latencies) * 1000:.1f} ms")
    left = Execution.objects.filter(organization=org, scheduled_for__lt=cutoff).count()
    print(f"  expired rows left: {left}")
    if archive:
        parts = list(Archive.objects.filter(organization=org).values_list("rows", "bytes"))
        stored = sum(size for _, size in parts)
        print(f"  archive: {len(parts)} parts, {sum(rows for rows, _ in parts):,} runs, {stored / 2**20:,.1f} MiB "
              f"gzip JSON Lines ({stored / max(1, sum(rows for rows, _ in parts)):,.0f} bytes/run), "
              f"{report.archive_failures} failed writes")


if __name__ == "__main__":
    main()
