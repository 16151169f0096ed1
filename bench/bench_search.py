"""History search benchmark (issue 23): searches of a large organization's history through
the real API (the Procfile's web process on PostgreSQL and Redis), against the plain
executions list measured in the same run, over ``--executions`` rows spread across several
organizations; and what the search index costs the workers' recording of finished runs.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_bench_search \\
    REDIS_URL=redis://127.0.0.1:6379/11 SECRET_KEY=bench-only \\
    .venv/bin/python bench/bench_search.py [--executions 1000000] [--runs 3] [--requests 100] [--quick]

The rows are bulk-loaded by INSERT ... SELECT over generate_series with varied error texts
(timeouts naming per-organization hosts, refusals, TLS and DNS errors, HTTP statuses) and
response bodies (JSON with ids and counters, nginx error pages, rate-limit answers); the
search index is dropped for the load and rebuilt after it with the migration's statement.
Six organizations hold 50 %, 20 %, 10 %, 10 %, 5 % and 5 % of the rows; the searches are
the largest one's. Each shape is requested ``--requests`` times per run by one client,
one request at a time, the shapes taking turns so a change of machine load touches all
of them; the figures are the median over ``--runs`` runs of each run's p50/p95/p99.
Prints figures; never passes or fails on a timing. See bench/README.md ("History search").
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchenv import log, prepare  # noqa: E402 - bench/ is on sys.path: run as a script
from bench_api import free_port, machine, start_web, stop  # noqa: E402

UTC = timezone.utc
ORGS = [("Bench Search", 0.50), ("Search Two", 0.20), ("Search Three", 0.10), ("Search Four", 0.10),
        ("Search Five", 0.05), ("Search Six", 0.05)]
JOBS_PER_ORG = 40
SPACING_SECONDS = 10
TARGET_P95_MS = 100
INSERT_CHUNK = 200_000

# What the rows say (SQL over g, the row's number; O is the organization's number, 1-6).
ERRORS = [
    "'HTTPSConnectionPool(host=''api-' || mod(g, 37) || '.customer' || O || '.example'', port=443): "
    "Read timed out. (read timeout=30)'",
    "'Connection refused'",
    "'[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired'",
    "'Name or service not known: hooks.customer' || O || '.example'",
    "'HTTP 500'", "'HTTP 502'", "'HTTP 503'", "'HTTP 429'",
    "'Response body did not contain \"\"status\"\": \"\"ok\"\"'",
]
BODIES_OF_FAILURES = [
    "''", "''", "''", "''",
    "'{\"error\": \"internal_error\", \"trace_id\": \"' || md5(g::text) || '\", \"detail\": \"database connection "
    "pool exhausted after 30 s\"}'",
    "'<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr>"
    "<center>nginx/1.25.3</center></body></html>'",
    "'<html><head><title>503 Service Temporarily Unavailable</title></head><body><h1>503 Service Temporarily "
    "Unavailable</h1><p>The server is temporarily unable to service your request due to maintenance downtime "
    "or capacity problems. Please try again later.</p></body></html>'",
    "'{\"error\": \"rate_limited\", \"message\": \"Too many requests\", \"retry_after\": ' || mod(g, 60) || '}'",
    "'{\"status\": \"degraded\", \"queue_depth\": ' || mod(g, 5000) || '}'",
]
SUCCESS_BODY = (
    "'{\"ok\": true, \"processed\": ' || mod(g, 1000) || ', \"batch\": \"b' || substr(md5(g::text), 1, 12) || "
    "'\", \"message\": \"' || (ARRAY['report generated and mailed to finance', 'cache warmed for all regions', "
    "'nightly export uploaded to bucket reports-' || O, 'invoices synced with the ledger', "
    "'no new records since the last run'])[1 + mod(g, 5)] || '\"' || CASE WHEN mod(g, 10) = 0 THEN "
    "', \"log\": \"' || repeat('step finished without warnings; ', 40) || '\"' ELSE '' END || '}'")


def search_shapes(org, project, rare_batch, window):
    return {  # name -> path
        "baseline list": "/api/v1/executions/?page_size=50",
        "word in error": "/api/v1/executions/?" + urlencode({"q": "refused", "page_size": 50}),
        "phrase in body": "/api/v1/executions/?" + urlencode({"q": '"connection pool exhausted"', "page_size": 50}),
        "status + range": "/api/v1/executions/?" + urlencode({"status_code": "5xx", "page_size": 50, **window}),
        "rare term": "/api/v1/executions/?" + urlencode({"q": rare_batch, "page_size": 50}),
        "common term": "/api/v1/executions/?" + urlencode({"q": "ok", "page_size": 50}),
        "other org's term": "/api/v1/executions/?" + urlencode({"q": "hooks.customer2.example", "page_size": 50}),
        "q + status + range": "/api/v1/executions/?" + urlencode({"q": "http", "status_code": "503",
                                                                  "page_size": 50, **window}),
        "project + words": f"/api/v1/projects/{project}/executions/?" + urlencode({"q": "timed out",
                                                                                   "page_size": 50}),
    }


# --- the data ------------------------------------------------------------------------------

def prepare_tenants(run_id):
    from apps.accounts.apikeys import create_api_key
    from apps.accounts.models import ApiKey, Organization
    from apps.jobs.models import Job
    from apps.plans.models import Plan
    from apps.projects.models import Project
    from apps.projects.provisioning import provision_tenant

    Plan.objects.filter(code="enterprise").update(api_requests_per_minute=10**9, max_jobs=10**9)
    tenants = []
    for n, (name, _) in enumerate(ORGS, 1):
        org = Organization.objects.filter(name=name).first() or provision_tenant(
            org_name=name, email=f"bench-search-{n}@example.com", plan_code="enterprise").organization
        projects = list(Project.objects.filter(organization=org).order_by("created_at"))
        if len(projects) < 2:
            projects.append(Project.objects.create(organization=org, name="Second", slug="second"))
        have = Job.objects.filter(organization=org).count()
        Job.objects.bulk_create([
            Job(organization=org, project=projects[i % 2], name=f"search job {i:03d}", enabled=False,
                schedule_type=Job.ScheduleType.CRON, cron_expression="*/5 * * * *", url="https://example.com/hook")
            for i in range(have, JOBS_PER_ORG)])
        jobs = [str(pk) for pk in Job.objects.filter(organization=org).order_by("name").values_list("pk", flat=True)]
        tenants.append((org, projects, jobs))
    org = tenants[0][0]
    ApiKey.objects.filter(organization=org, name__startswith="bench ").delete()
    _, key = create_api_key(org, f"bench {run_id}", scopes=("read",))
    return tenants, key


def load(tenants, target, migration):
    from django.db import connection

    from apps.executions.models import Execution

    table = Execution._meta.db_table
    if Execution.objects.count() == target:
        log(f"reusing {target:,} executions")
        return
    log(f"loading {target:,} executions over {len(tenants)} organizations")
    started = time.monotonic()
    base = datetime.now(UTC).replace(microsecond=0)
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {table} CASCADE")
        cursor.execute(f"DROP INDEX IF EXISTS {migration.INDEX_NAME}")
        cursor.execute(migration.FUNCTION_SQL)
        cursor.execute("SET synchronous_commit = off")
        offset = 0
        for n, ((org, _, jobs), (_, share)) in enumerate(zip(tenants, ORGS), 1):
            rows = int(target * share) if n < len(tenants) else target - offset
            statement, params = _insert_statement(org, jobs, n, base)
            for first in range(0, rows, INSERT_CHUNK):
                cursor.execute(statement, {**params, "first": first, "last": min(rows, first + INSERT_CHUNK) - 1})
            offset += rows
            log(f"  {org.name}: {rows:,} rows")
        log(f"rows in {time.monotonic() - started:.0f} s; building {migration.INDEX_NAME}")
        cursor.execute("SET maintenance_work_mem = '256MB'")
        cursor.execute(f"CREATE INDEX {migration.INDEX_NAME} ON {table} USING gin "
                       f"(organization_id, ({migration.DOCUMENT_SQL})) WHERE {migration.HAS_TEXT_SQL}")
        cursor.execute(f"CREATE STATISTICS IF NOT EXISTS {migration.STATISTICS_NAME} ON ({migration.DOCUMENT_SQL}) "
                       f"FROM {table}")
        cursor.execute(f"VACUUM (ANALYZE) {table}")
    log(f"loaded and indexed in {time.monotonic() - started:.0f} s")


def analyze_jobs():
    """The jobs' statistics: the project's history joins them, and with none (a fresh table,
    autovacuum off) PostgreSQL takes a project for one job and plans a search per job."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE jobs_job")


def _insert_statement(org, jobs, o, base):
    """INSERT ... SELECT over generate_series; columns not varied get the model's default."""
    from django.db import connection

    from apps.executions.models import Execution

    at = f"(%(base)s::timestamptz - g * interval '{SPACING_SECONDS} seconds')"
    failed = "(g * 7) %% 100 < 12"  # 12 % of the runs fail
    kind = "(g / 7) %% 9"
    varying = {
        "id": "gen_random_uuid()",
        "job_id": "(%(jobs)s::uuid[])[1 + g %% %(njobs)s]",
        "organization_id": "%(org)s",
        "scheduled_for": at, "created_at": at, "published_at": at,
        "started_at": f"{at} + interval '150 milliseconds'",
        "finished_at": f"{at} + interval '400 milliseconds'",
        "duration_ms": "50 + (g * 7919) %% 950",
        "status": f"CASE WHEN {failed} THEN 'failed' ELSE 'succeeded' END",
        "attempt": "1",
        "response_status": (f"CASE WHEN NOT {failed} THEN 200 WHEN {kind} < 4 THEN NULL "
                            f"ELSE (ARRAY[500, 502, 503, 429, 200])[{kind} - 3] END"),
        "error_kind": f"CASE WHEN {failed} THEN 'failed' ELSE '' END",
        "error_message": f"CASE WHEN {failed} THEN (ARRAY[{', '.join(ERRORS)}])[1 + {kind}] ELSE '' END",
        "response_body": (f"CASE WHEN {failed} THEN (ARRAY[{', '.join(BODIES_OF_FAILURES)}])[1 + {kind}] "
                          f"ELSE {SUCCESS_BODY} END"),
    }
    template = Execution()
    columns, values, params = [], [], {}
    for field in Execution._meta.concrete_fields:
        columns.append(field.column)
        if field.column in varying:
            values.append(varying[field.column].replace("|| O", f"|| {o}"))  # o: an int
        else:
            name = f"s_{field.column}"
            params[name] = field.get_db_prep_save(field.pre_save(template, add=True), connection)
            values.append(f"CAST(%({name})s AS {field.db_type(connection)})")
    params.update(base=base, jobs=jobs, njobs=len(jobs), org=org.pk)
    return (f"INSERT INTO {Execution._meta.db_table} ({', '.join(columns)}) "
            f"SELECT {', '.join(values)} FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g"), params


def rare_batch(org):
    """The batch id of one success of the organization: a word in exactly one body."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT substring(response_body from '\"batch\": \"(b[0-9a-f]+)\"') FROM executions_execution "
                       "WHERE organization_id = %s AND status = 'succeeded' ORDER BY scheduled_for "
                       "OFFSET 12345 LIMIT 1", [org.pk])
        return cursor.fetchone()[0]


# --- measuring -----------------------------------------------------------------------------

def measure(base_url, key, shapes, requests):
    """One run: each shape ``requests`` times, in turns; per shape p50/p95/p99 in ms."""
    timings = {name: [] for name in shapes}
    headers = {"Authorization": f"Bearer {key}"}
    for _ in range(requests):
        for name, path in shapes.items():
            request = urllib.request.Request(base_url + path, headers=headers)
            started = time.perf_counter()
            with urllib.request.urlopen(request, timeout=30) as response:
                response.read()
                assert response.status == 200, (path, response.status)
            timings[name].append((time.perf_counter() - started) * 1000)
    return {name: percentiles(values) for name, values in timings.items()}


def percentiles(values):
    ordered = sorted(values)

    def rank(p):  # nearest rank
        return ordered[max(0, min(len(ordered) - 1, -(-len(ordered) * p // 100) - 1))]

    return {"p50": rank(50), "p95": rank(95), "p99": rank(99)}


def results_found(base_url, key, shapes):
    import json

    found = {}
    for name, path in shapes.items():
        request = urllib.request.Request(base_url + path, headers={"Authorization": f"Bearer {key}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            found[name] = len(json.load(response)["results"])
    return found


def recording_cost(rows, batch, rounds):
    """Microseconds per finished run recorded by the workers' set-based UPDATE
    (apps.executions.worker.recording._finish_many), with the search index and without it."""
    from django.db import connection, transaction

    from apps.executions.worker import recording
    from apps.executions.models import Execution
    from apps.jobs.models import Job

    migration = importlib.import_module("apps.executions.migrations.0005_execution_search_index")
    job = Job.objects.filter(name="search job 000").order_by("created_at").first()
    base = datetime(2020, 1, 1, tzinfo=UTC)
    Execution.objects.filter(job=job, scheduled_for__lt=base + timedelta(days=1)).delete()
    runs = Execution.objects.bulk_create([
        Execution(job=job, organization_id=job.organization_id, scheduled_for=base + timedelta(seconds=i),
                  status="running") for i in range(rows)])
    now = datetime.now(UTC)

    def result(run, i):
        attempt = recording.AttemptValues(
            number=1, started_at=now, finished_at=now, duration_ms=120, request_method="POST",
            request_url="https://example.com/hook", request_headers={}, request_body="", response_status=503,
            response_headers={}, response_body=("<html><h1>503 Service Temporarily Unavailable</h1> nginx "
                                                f"request {i} {run.id}</html>"), remote_addr="203.0.113.7",
            outcome="failed", error_kind="http_5xx", error_message="HTTP 503")
        return recording.FinishedAttempt(execution=run, attempt=attempt, status="failed", next_attempt_at=None,
                                auto_disable_after=0)

    results = [result(run, i) for i, run in enumerate(runs)]
    table = Execution._meta.db_table
    figures = {"with index": [], "without index": []}
    for round_ in range(rounds):
        for label in ("with index", "without index") if round_ % 2 == 0 else ("without index", "with index"):
            with connection.cursor() as cursor:
                if label == "without index":
                    cursor.execute(f"DROP INDEX IF EXISTS {migration.INDEX_NAME}")
                else:
                    cursor.execute(f"CREATE INDEX IF NOT EXISTS {migration.INDEX_NAME} ON {table} USING gin "
                                   f"(organization_id, ({migration.DOCUMENT_SQL})) WHERE {migration.HAS_TEXT_SQL}")
                cursor.execute(f"UPDATE {table} SET status = 'running', response_body = '', error_message = '' "
                               "WHERE id = ANY(%s)", [[r.id for r in runs]])
                cursor.execute(f"VACUUM {table}")
            started = time.perf_counter()
            for first in range(0, rows, batch):
                with transaction.atomic():
                    recording._finish_many(results[first:first + batch])
            figures[label].append((time.perf_counter() - started) * 1e6 / rows)
    with connection.cursor() as cursor:  # the index back, the scratch runs gone
        cursor.execute(f"CREATE INDEX IF NOT EXISTS {migration.INDEX_NAME} ON {table} USING gin "
                       f"(organization_id, ({migration.DOCUMENT_SQL})) WHERE {migration.HAS_TEXT_SQL}")
    Execution.objects.filter(pk__in=[r.id for r in runs]).delete()
    return {label: statistics.median(values) for label, values in figures.items()}


def load_average():
    return os.getloadavg()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--executions", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3, help="runs (median of their percentiles)")
    parser.add_argument("--requests", type=int, default=100, help="requests per shape per run")
    parser.add_argument("--recording-rows", type=int, default=5000, help="runs recorded per recording round")
    parser.add_argument("--quick", action="store_true", help="100k executions, 1 run of 30 requests per shape")
    args = parser.parse_args()
    if args.quick:
        args.executions, args.runs, args.requests = min(args.executions, 100_000), 1, 30

    prepare("postgres://postgres@127.0.0.1:5432/cronsvc_bench_search", "redis://127.0.0.1:6379/11",
            refused_redis=("0", "4", "5", "6", "7", "8", "10"))
    migration = importlib.import_module("apps.executions.migrations.0005_execution_search_index")
    tenants, key = prepare_tenants(str(int(time.time())))
    load(tenants, args.executions, migration)
    analyze_jobs()
    org, projects, _ = tenants[0]
    newest = datetime.now(UTC)
    window = {"scheduled_for_after": (newest - timedelta(days=3)).isoformat(),
              "scheduled_for_before": (newest - timedelta(days=2)).isoformat()}
    shapes = search_shapes(org, projects[0].pk, rare_batch(org), window)

    port = free_port()
    logfile = open(Path(tempfile.gettempdir()) / f"bench-search-web-{port}.log", "w")
    web, command = start_web(port, logfile)
    base_url = f"http://127.0.0.1:{port}"
    try:
        found = results_found(base_url, key, shapes)
        measure(base_url, key, shapes, 5)  # warm-up: connections, caches
        runs, loads = [], []
        for n in range(args.runs):
            runs.append(measure(base_url, key, shapes, args.requests))
            loads.append(load_average())
            log(f"run {n + 1}: " + ", ".join(f"{name} p95 {r['p95']:.1f}" for name, r in runs[-1].items()))
    finally:
        stop(web)
    log("recording cost")
    recording = recording_cost(args.recording_rows, 50, 3)

    print(f"\n{args.executions:,} executions, {len(ORGS)} organizations; searches of the largest "
          f"({ORGS[0][1]:.0%}); web: {command}; {machine()}; load average during the runs: "
          f"{statistics.median(loads):.2f} (1-min, median of the runs)\n")
    print("| shape | rows on the page | p50 ms | p95 ms | p99 ms | p95 < 100 ms |")
    print("|---|---:|---:|---:|---:|---|")
    for name in shapes:
        cell = {p: statistics.median(run[name][p] for run in runs) for p in ("p50", "p95", "p99")}
        met = "" if name == "baseline list" else ("met" if cell["p95"] < TARGET_P95_MS else "**missed**")
        print(f"| {name} | {found[name]} | {cell['p50']:.1f} | {cell['p95']:.1f} | {cell['p99']:.1f} | {met} |")
    print(f"\nRecording finished runs (`_finish_many`, batches of 50, {args.recording_rows:,} runs, median of 3): "
          f"{recording['with index']:.0f} µs per run with exec_search, {recording['without index']:.0f} µs "
          f"without it (+{recording['with index'] - recording['without index']:.0f} µs).")
    print("\nShapes: " + "; ".join(f"{name}: `{path}`" for name, path in shapes.items()))


if __name__ == "__main__":
    main()
