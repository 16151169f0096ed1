"""API load benchmark (issues 6 and 38): the REST API over HTTP, served by the web server exactly
as the Procfile's ``web`` line, on PostgreSQL and Redis.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_bench_api \\
    REDIS_URL=redis://127.0.0.1:6379/4 SECRET_KEY=bench-only \\
    .venv/bin/python bench/bench_api.py [--mode open|closed|both] [--rate 500] [--executions 1000000]

``--mode open`` (the default; issue 38): the latency *at* a rate. A mix of what users ask
(``MIX``: job reads, 50-job lists, history pages org-wide, per job and half-way down, creates
with a host name in the URL, triggers) is sent at a fixed ``--rate`` by bench/openloop.py
(wrk2's method: latency from the scheduled send time), then the history pages alone at
``--history-rate`` (``HISTORY_KINDS``: the mix's three and a project of one job's); /healthz at ``--rate`` through the same server is each run's baseline.
Figures per kind of request and for the whole mix, with the load average and the load
generator's own CPU (it shares the machine). ``--only history``: the history pages alone
(the baseline at ``--history-rate``, no mix: the mix at 500/s saturates a 2-core machine for
minutes), e.g. to measure the 10M-row history against an already-loaded database; it writes
no figures into bench/README.md unless ``--readme``.

``--mode cpu``: where the machine's CPU goes while the Procfile's web process serves the mix
at ``--rate`` (one that it sustains, e.g. 200) for ``--seconds``: CPU ms per request served of
the web process's main process and workers, the database's PostgreSQL backends, redis-server,
and the load generator (from /proc: figures a busy machine moves little).

``--mode costs``: only the cost table below (SQL statements, Python calls and CPU per kind
of request, in this process), e.g. with ``--executions 20000`` for a quick look.

``--mode closed`` (issue 6): each scenario alone, driven by wrk (Debian's ``wrk``: ``make
wrk``) at 20 and 100 closed-loop connections (the throughput at saturation) and at 20 paced
clients (each waits about ``--think-ms`` between requests). Each cell is the median of
``--runs`` wrk runs of ``--seconds``.

Both print the SQL of the executions list (no COUNT, keyset) and its EXPLAIN ANALYZE at full
size. The database in DATABASE_URL is created and migrated when missing, and its executions
table is reloaded when it does not hold ``--executions`` rows (generate_series on the server,
the secondary indexes dropped during the load and built after: minutes for 10M rows, times
in bench/README.md): it must be a database of its own (its name must
contain "bench"). The Redis index must not be 0. The bench tenant is on the enterprise plan,
whose API quota (requests per minute) is raised to 10^9 in this database so the throttle
counts every request but refuses none. The jobs the creates make and the runs the triggers
start are deleted after each run. Prints figures; never passes or fails on a timing. See
bench/README.md ("API") for the method and the latest figures.
"""

from __future__ import annotations

import argparse
import base64
import json
import logging
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
WRK_DIR = ROOT / "bench" / "wrk"
sys.path.insert(0, str(ROOT))

import proccpu  # noqa: E402 - bench/ is on sys.path: run as a script
from benchenv import log, prepare  # noqa: E402
from openloop import ALL, Request, paced_run  # noqa: E402
from openloop import median_of as open_median  # noqa: E402
UTC = timezone.utc

BENCH_ORG = "Bench API"
BENCH_EMAIL = "bench-api@example.com"
SPACING_SECONDS = 5  # executions are 5 s apart, newest at the load time
INSERT_CHUNK = 250_000
# p95 targets in ms at 20 clients (issue 6); reads must also reach READS_PER_SECOND.
TARGETS = {"create": 50, "read": 50, "list": 50, "executions": 100, "executions_deep": 100}
READS_PER_SECOND = 500
PACED = "paced"  # the results key of the paced clients' cell
PACED_SECONDS = 30  # at least, per paced run; its first WARMUP_MS are left out of the figures
WARMUP_MS = 5000
SCENARIOS = {  # name -> what it requests
    "baseline": "GET /healthz (no database, no auth)",
    "read": "GET /api/v1/jobs/{id}/ (random job)",
    "list": "GET /api/v1/jobs/?page_size=50",
    "executions": "GET /api/v1/executions/?page_size=50 (first page)",
    "executions_deep": "GET /api/v1/executions/?cursor=... (half-way down)",
    "create": "POST /api/v1/jobs/",
}


# The open-loop mix (issue 38): what a dashboard and a deploy script ask of the API, by weight.
MIX = {"read": 50, "list": 15, "executions": 10, "job_executions": 10, "executions_deep": 5,
       "create": 5, "trigger": 5}
MIX_KINDS = {  # kind -> what it requests
    "read": "GET /api/v1/jobs/{id}/ (a random job)",
    "list": "GET /api/v1/jobs/?page_size=50",
    "executions": "GET /api/v1/executions/?page_size=50 (first page)",
    "job_executions": "GET /api/v1/jobs/{id}/executions/?page_size=50 (a random job's history)",
    "executions_deep": "GET /api/v1/executions/?page_size=50&cursor=... (half-way down)",
    "create": "POST /api/v1/jobs/ (cron job, URL with a host name)",
    "trigger": "POST /api/v1/jobs/{id}/trigger/ (a random job)",
}
#: The history pages measured alone (at --history-rate): the mix's three, and a small
#: project's (SMALL_PROJECT: one job of --jobs), which the mix does not ask.
HISTORY_KINDS = ("executions", "job_executions", "executions_deep", "small_project")
SMALL_PROJECT = "Bench small project"
OPEN_TARGETS = {"mix": 50, "history": 100}  # p95 ms: the mix at --rate, history pages at --history-rate
OK = (200, 201, 202)


def ensure_wrk():
    if shutil.which("wrk"):
        return
    log("wrk is missing: installing the Debian package")
    subprocess.run("apt-get install -y wrk || (apt-get update && apt-get install -y wrk)", shell=True, check=True)


# --- data --------------------------------------------------------------------------------

def prepare_tenant(jobs_count, run_id):
    """The bench tenant (enterprise plan, quota lifted), ``jobs_count`` jobs, a fresh API key."""
    from apps.accounts.apikeys import create_api_key
    from apps.accounts.models import ApiKey, Organization
    from apps.jobs.models import Job
    from apps.plans.models import Plan
    from apps.projects.models import Project
    from apps.projects.provisioning import provision_tenant

    Plan.objects.filter(code="enterprise").update(api_requests_per_minute=10**9, max_jobs=10**9)
    org = Organization.objects.filter(name=BENCH_ORG).first()
    if org is None:
        org = provision_tenant(org_name=BENCH_ORG, email=BENCH_EMAIL, plan_code="enterprise").organization
    project = Project.objects.filter(organization=org).order_by("created_at").first()
    Job.objects.filter(organization=org, name__startswith="bench create").delete()  # earlier create runs
    have = Job.objects.filter(organization=org).count()
    Job.objects.bulk_create([
        Job(organization=org, project=project, name=f"bench job {n:05d}", schedule_type=Job.ScheduleType.CRON,
            cron_expression="*/5 * * * *", url="https://example.com/hooks/bench", enabled=False)
        for n in range(have, jobs_count)
    ], batch_size=1000)
    ApiKey.objects.filter(organization=org, name__startswith="bench ").delete()
    _, key = create_api_key(org, f"bench {run_id}", scopes=("read", "write"))
    job_ids = [str(pk) for pk in Job.objects.filter(organization=org).values_list("pk", flat=True)[:jobs_count]]
    # A project of one job (the last): its history is a 1/jobs share of the organization's.
    small, _ = Project.objects.get_or_create(organization=org, slug="bench-small",
                                             defaults={"name": SMALL_PROJECT})
    Job.objects.filter(organization=org, project=small).exclude(pk=job_ids[-1]).update(project=project)
    Job.objects.filter(pk=job_ids[-1]).update(project=small)
    return org, project, small, key, job_ids


def load_executions(org, job_ids, target):
    """Exactly ``target`` executions of the bench tenant, spread over its jobs."""
    from django.db import connection, transaction

    from apps.executions.models import Execution

    table = Execution._meta.db_table
    have = Execution.objects.filter(organization=org).count()
    if have == target:
        log(f"reusing {have:,} executions")
        return
    log(f"loading {target:,} executions (table had {have:,})")
    started = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:  # all or nothing: indexes dropped and back
        cursor.execute(f"TRUNCATE {table} CASCADE")
        cursor.execute("SET LOCAL synchronous_commit = off")
        cursor.execute("SET LOCAL session_replication_role = replica")  # no foreign-key check per row: the rows are made consistent
        indexes = _drop_indexes(cursor, table)
        statement, params = _insert_statement(org, job_ids)
        for first in range(0, target, INSERT_CHUNK):
            cursor.execute(statement, {**params, "first": first, "last": min(target, first + INSERT_CHUNK) - 1})
            if (first // INSERT_CHUNK) % 4 == 3 or first + INSERT_CHUNK >= target:
                log(f"  {min(target, first + INSERT_CHUNK):,} rows ({time.monotonic() - started:.0f} s)")
        cursor.execute("SET LOCAL session_replication_role = DEFAULT")
        cursor.execute("SET LOCAL maintenance_work_mem = '256MB'")
        for definition in indexes:
            cursor.execute(definition)
        log(f"  {len(indexes)} indexes rebuilt ({time.monotonic() - started:.0f} s)")
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM (ANALYZE) {table}")
    log(f"loaded in {time.monotonic() - started:.0f} s")


def _drop_indexes(cursor, table):
    """Drop the table's indexes that back no constraint and return their definitions: one
    sort per index after the load is many times faster than keeping 10 indexes (a GIN among
    them) up to date row by row (what pg_restore does too)."""
    cursor.execute("SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
                   "WHERE i.indrelid = %s::regclass AND NOT EXISTS "
                   "(SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)", [table])
    found = cursor.fetchall()
    for name, _ in found:
        cursor.execute(f"DROP INDEX {name}")
    return [definition for _, definition in found]


def _insert_statement(org, job_ids):
    """INSERT ... SELECT over generate_series: every column the bench does not vary gets the
    model's own default, so columns added later need no change here."""
    from django.db import connection

    from apps.executions.models import Execution

    at = "(%(base)s::timestamptz - g * interval '5 seconds')"
    failed = "g %% 20 = 0"
    varying = {
        "id": "gen_random_uuid()",
        "job_id": "(%(jobs)s::uuid[])[1 + g %% %(njobs)s]",
        "organization_id": "%(org)s",
        "scheduled_for": at,
        "created_at": at,
        "published_at": at,
        "started_at": f"{at} + interval '150 milliseconds'",
        "finished_at": f"{at} + interval '150 milliseconds' + (50 + (g * 7919) %% 950) * interval '1 millisecond'",
        "duration_ms": "50 + (g * 7919) %% 950",
        "status": f"CASE WHEN {failed} THEN 'failed' ELSE 'succeeded' END",
        "attempt": "1",
        "queue": "'runs.enterprise'",
        "response_status": f"CASE WHEN {failed} THEN 500 ELSE 200 END",
        "response_body": "'{\"ok\": true}'",
        "error_kind": f"CASE WHEN {failed} THEN 'http_status' ELSE '' END",
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
            values.append(f"CAST(%({name})s AS {field.db_type(connection)})")  # NULLs need their type
    params.update(base=datetime.now(UTC), jobs=job_ids, njobs=len(job_ids), org=org.pk)
    statement = (f"INSERT INTO {Execution._meta.db_table} ({', '.join(columns)}) "
                 f"SELECT {', '.join(values)} FROM generate_series(%(first)s::bigint, %(last)s::bigint) AS g")
    return statement, params


def vacuum_analyze():
    """Dead rows cleared and fresh planner statistics, as autovacuum keeps them on a live
    system. Without statistics PostgreSQL may read a job through its organization's index,
    row by row; without the vacuum (autovacuum may be off on a development server: it is
    on this kind of machine) every run's deleted jobs stay behind as dead rows, and counting
    or listing an organization's jobs walks them all (17,000 dead beside 1,400 live were
    seen)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM (ANALYZE)")


def deep_cursor(org, depth):
    """A keyset cursor ``depth`` rows down, encoded as DRF's CursorPagination encodes it."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT scheduled_for FROM executions_execution WHERE organization_id = %s "
                       "ORDER BY scheduled_for DESC, id DESC OFFSET %s LIMIT 1", [org.pk, depth])
        row = cursor.fetchone()
    if row is None:
        return None
    return base64.b64encode(urlencode({"p": str(row[0])}).encode()).decode()


def history_explain_paths(context):
    """(label, path) of each history page the bench explains: the three history kinds, and
    the project's history and the dead-letter list (both through the ORM's query)."""
    return [("first page", "/api/v1/executions/?page_size=50"),
            ("deep page", f"/api/v1/executions/?page_size=50&cursor={context['cursor']}"),
            ("a job's page", f"/api/v1/jobs/{context['job_ids'][0]}/executions/?page_size=50"),
            ("the project's page", f"/api/v1/projects/{context['project']}/executions/?page_size=50"),
            ("a small project's page (1 job)",
             f"/api/v1/projects/{context['small_project']}/executions/?page_size=50"),
            ("a small project's page half-way down",
             f"/api/v1/projects/{context['small_project']}/executions/?page_size=50&cursor={context['cursor']}"),
            ("dead-letter page", "/api/v1/dead-letter/?page_size=50")]


def explain_executions_list(key, paths):
    """The SQL Django runs for the executions list pages (through the real view, in-process)
    and EXPLAIN (ANALYZE, BUFFERS) of the page query: keyset on an index, no COUNT."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {key}")
    lines = []
    for label, path in paths:
        with CaptureQueriesContext(connection) as captured:
            response = client.get(path)
        assert response.status_code == 200, (path, response.status_code, response.content[:300])
        statements = [q["sql"] for q in captured.captured_queries]
        # COUNTs of the executions (a page number's total): the keyset pages have none (a
        # project's page counts the project's jobs, ListedExecutions' choice of its read)
        counts = [s for s in statements if "COUNT(" in s.upper() and "executions_execution" in s]
        page = next(s for s in statements if "FROM \"executions_execution\"" in s and "LIMIT" in s)
        lines.append(f"{label}: {len(statements)} queries, COUNT queries: {len(counts)}")
        lines.append(f"  page query: {page}")
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + page)
            lines += ["    " + row[0] for row in cursor.fetchall()]
    return "\n".join(lines)


def mix_requests(count, seed, *, job_ids, project, small_project, cursor, run_id, mix=MIX):
    """``count`` requests drawn from ``mix`` (kind -> weight), in a seeded random order."""
    import random

    rng = random.Random(seed)
    kinds = rng.choices(list(mix), weights=list(mix.values()), k=count)
    return [_request(kind, rng, n, job_ids=job_ids, project=project, small_project=small_project, cursor=cursor,
                     run_id=run_id) for n, kind in enumerate(kinds)]


def _request(kind, rng, n, *, job_ids, project, small_project, cursor, run_id):
    job = rng.choice(job_ids)
    if kind == "create":
        body = {"project": project, "name": f"bench create {run_id}-{n}",
                "schedule": {"type": "cron", "expression": "*/5 * * * *", "timezone": "Europe/Berlin"},
                "request": {"url": f"https://hooks{n % 7}.example.com/bench", "method": "POST", "body": "{}"}}
        return Request(kind, "POST", "/api/v1/jobs/", json.dumps(body).encode())
    path = {"read": f"/api/v1/jobs/{job}/", "list": "/api/v1/jobs/?page_size=50",
            "executions": "/api/v1/executions/?page_size=50",
            "job_executions": f"/api/v1/jobs/{job}/executions/?page_size=50",
            "executions_deep": f"/api/v1/executions/?page_size=50&cursor={cursor}",
            "small_project": f"/api/v1/projects/{small_project}/executions/?page_size=50",
            "trigger": f"/api/v1/jobs/{job}/trigger/"}[kind]
    return Request(kind, "POST" if kind == "trigger" else "GET", path)


def request_costs(key, context, org, repeat=20, kinds=tuple(MIX)):
    """Per kind of the mix, in this process through Django's test client (no server, no
    network): SQL statements per request, Python function calls per request (cProfile's
    count: the same on a busy or an idle machine), CPU ms and elapsed ms per request (the
    median of five batches; elapsed includes the waits on PostgreSQL, Redis and DNS). Where the time goes, in figures a busy machine does not move (the first
    two)."""
    from django.test import Client

    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Bearer {key}")

    def send(request):
        if request.method == "GET":
            response = client.get(request.path)
        else:
            response = client.post(request.path, request.body, content_type="application/json")
        assert response.status_code in OK, (request.path, response.status_code, response.content[:300])

    # One access-log line per request would bury the table (and cost CPU it then counts).
    access_log = logging.getLogger("cronsvc.access")
    level = access_log.level
    access_log.setLevel(logging.WARNING)  # setLevel: it also clears logging's per-logger cache
    try:
        return _request_costs(send, context, org, repeat, kinds)
    finally:
        access_log.setLevel(level)


def _request_costs(send, context, org, repeat, kinds):
    import cProfile
    import pstats

    from django.db import connection

    costs = {}
    for kind in kinds:
        requests = mix_requests(1 + 6 * repeat, 99, mix={kind: 1}, **context)
        send(requests[0])  # the key's cache, the thread's representation plans
        connection.queries_log.clear()  # a request empties the log as it starts: count from empty
        connection.force_debug_cursor = True
        try:
            send(requests[1])
            queries = len(connection.queries_log)
        finally:
            connection.force_debug_cursor = False
        profile = cProfile.Profile()
        profile.runcall(lambda: [send(r) for r in requests[1:1 + repeat]])
        calls = sum(entry[1] for entry in pstats.Stats(profile).stats.values()) / repeat
        cpu, wall = [], []
        for batch in range(5):
            started, clock = time.process_time(), time.monotonic()
            for request in requests[1 + repeat * (1 + batch):1 + repeat * (2 + batch)]:
                send(request)
            cpu.append((time.process_time() - started) * 1000 / repeat)
            wall.append((time.monotonic() - clock) * 1000 / repeat)
        costs[kind] = {"queries": queries, "calls": calls, "cpu_ms": statistics.median(cpu),
                       "wall_ms": statistics.median(wall), "load": os.getloadavg()[0]}
        log(f"{kind:16} {queries} queries, {calls:,.0f} Python calls, {costs[kind]['cpu_ms']:.2f} ms CPU, "
            f"{costs[kind]['wall_ms']:.2f} ms in all per request")
    forget_bench_writes(org)
    return costs


def costs_table(costs):
    out = ["| request | SQL statements | Python calls | CPU ms | elapsed ms | load avg |", "|---|---:|---:|---:|---:|---:|"]
    out += [f"| {kind} | {c['queries']} | {c['calls']:,.0f} | {c['cpu_ms']:.2f} | {c['wall_ms']:.2f} | {c['load']:.2f} |"
            for kind, c in costs.items()]
    return "\n".join(out)


def forget_bench_writes(org):
    """The jobs the creates made and the runs the triggers started, so the next run starts
    from the same tables (and the executions table keeps its ``--executions`` rows)."""
    from apps.executions.models import Execution
    from apps.jobs.models import Job

    Execution.objects.filter(organization=org, trigger=Execution.Trigger.MANUAL).delete()
    Job.objects.filter(organization=org, name__startswith="bench create").delete()


def server_cpu(web):
    """CPU seconds used so far by the web server (the Procfile's process and its workers: the
    process group start_web made) and by PostgreSQL's client backends on the bench database
    (but this process's own), by pid: CPU time is what a busy machine does not move."""
    from django.db import connection

    used = {}
    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                       "AND backend_type = 'client backend' AND pid <> pg_backend_pid()")
        backends = {row[0] for row in cursor.fetchall()}
    for pid in set(proccpu.process_group(web.pid)) | backends:
        try:
            used[pid] = proccpu.cpu_seconds(pid)[1]
        except FileNotFoundError:  # gone meanwhile
            continue
    return used


def cpu_ms_per_request(before, after, requests):
    """Server CPU ms per request between two server_cpu readings (a process new in between
    counts whole; one gone in between is lost: PostgreSQL's connections outlive a run here)."""
    return sum(seconds - before.get(pid, 0) for pid, seconds in after.items()) * 1000 / max(requests, 1)


def measured(web, port, requests, rate, connections, **kwargs):
    """paced_run of ``requests``, each kind's figures with the server's CPU ms per request
    of the whole run (``server_cpu_ms``)."""
    before = server_cpu(web)
    cells = paced_run(port, requests, rate, connections, **kwargs)
    per_request = cpu_ms_per_request(before, server_cpu(web), len(requests))
    return {kind: cell | {"server_cpu_ms": per_request} for kind, cell in cells.items()}


def open_loop(port, key, args, context, org, web):
    """Each run: /healthz at --rate (the machine's floor: no database, no auth), the mix at
    --rate, then the history pages alone at --history-rate (with ``--only history``: /healthz
    at --history-rate and the history pages, no mix). Returns {row: median figures}."""
    headers = [f"Authorization: Bearer {key}", "Accept: application/json", "Content-Type: application/json"]
    mix = args.only != "history"
    baseline_rate = args.rate if mix else args.history_rate
    history = {kind: 1 for kind in HISTORY_KINDS}
    paced_run(port, mix_requests(2 * baseline_rate, -1, **context, mix=MIX if mix else history), baseline_rate,
              args.open_connections, headers=headers, ok=OK)  # warm-up: imports, caches, connections
    samples = {}
    for run in range(args.runs):
        vacuum_analyze()
        cells = {"baseline": measured(web, port, ["/healthz"] * (baseline_rate * args.seconds), baseline_rate,
                                      args.open_connections)[ALL]}
        if mix:
            mixed = measured(web, port, mix_requests(args.rate * args.seconds, run, **context), args.rate,
                             args.open_connections, headers=headers, ok=OK)
            cells |= {f"mix: {kind}": cell for kind, cell in mixed.items() if kind != ALL} | {"mix": mixed[ALL]}
        pages = measured(web, port, mix_requests(args.history_rate * args.seconds, 1000 + run, **context, mix=history),
                         args.history_rate, max(1, args.open_connections // 5), headers=headers, ok=OK)
        cells |= {"history": pages[ALL]} | {f"history: {kind}": pages[kind] for kind in HISTORY_KINDS if kind in pages}
        for name, cell in cells.items():
            samples.setdefault(name, []).append(cell)
        shown = ("baseline", "mix", "history") if mix else ("baseline", "history")
        log(f"open loop run {run + 1}: " + "; ".join(
            f"{name} {cells[name]['rate']:.0f}/s p95 {cells[name]['p95']:.1f} ms "
            f"(server CPU {cells[name]['server_cpu_ms']:.2f} ms/request)" for name in shown)
            + f"; load {cells[shown[1]]['load']:.2f}, generator CPU {cells[shown[1]]['load_cpu']:.0f} %"
            + "".join(f"; {name} errors {cells[name]['statuses']}" for name in cells if cells[name]["errors"]))
        forget_bench_writes(org)
    order = ["baseline", "mix", *(f"mix: {kind}" for kind in MIX), "history", *(f"history: {kind}" for kind in HISTORY_KINDS)]
    return {name: open_median(samples[name]) | {"server_cpu_ms": statistics.median(
        cell["server_cpu_ms"] for cell in samples[name])} for name in order if name in samples}


def cpu_split(port, key, args, context, web):
    """The mix at --rate for --seconds; CPU ms per request served of each process of the
    stack (/proc), context switches per request, and the machine's busy CPU (others too)."""
    from django.db import connection

    headers = [f"Authorization: Bearer {key}", "Accept: application/json", "Content-Type: application/json"]
    paced_run(port, mix_requests(2 * args.rate, -1, **context), args.rate, args.open_connections,
              headers=headers, ok=OK)  # warm-up: each worker's connections, caches, plans

    def backends():  # the web workers' (this process's excluded)
        with connection.cursor() as cursor:
            cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                           "AND pid <> pg_backend_pid()")
            return [row[0] for row in cursor.fetchall()]

    server, *workers = sorted(proccpu.process_group(web.pid))
    groups = {"web: granian main process": [server], f"web: {len(workers)} workers": workers,
              "PostgreSQL backends": backends(),
              "redis-server (shared with other users)": proccpu.pids_named("redis-server")}
    before = proccpu.Snapshot(groups, threads_of=workers)
    started = time.process_time()
    result = paced_run(port, mix_requests(args.rate * args.seconds, 7, **context), args.rate,
                       args.open_connections, headers=headers, ok=OK, warmup=0)[ALL]
    generator = time.process_time() - started
    # A worker thread that first needed the database during the run opened a backend then:
    # its CPU from its start counts (0 before).
    groups["PostgreSQL backends"] = sorted(set(groups["PostgreSQL backends"]) | set(backends()))
    after = proccpu.Snapshot(groups, threads_of=workers)
    served = result["count"]
    rows = {label: sum(after.cpu[label][pid] - before.cpu[label].get(pid, 0.0) for pid in pids)
            for label, pids in groups.items()}
    rows["load generator (bench process)"] = generator
    switches = {label: after.switches[label] - before.switches[label] for label in groups}
    stack = sum(rows.values())
    out = [(f"{served:,} requests of the mix at {args.rate}/s ({result['rate']:.0f}/s served, p50 "
            f"{result['p50']:.1f} ms, p95 {result['p95']:.1f} ms, errors {result['errors']}); "
            f"{len(groups['PostgreSQL backends'])} PostgreSQL backends; load average {os.getloadavg()[0]:.2f}"), "",
           "| process | CPU ms per request | share of the stack | context switches per request |",
           "|---|---:|---:|---:|"]
    out += [f"| {label} | {1000 * seconds / served:.3f} | {100 * seconds / stack:.0f} % | "
            + (f"{switches[label] / served:.1f} |" if label in switches else " |")
            for label, seconds in rows.items()]
    out.append(f"| **the stack** | **{1000 * stack / served:.3f}** | 100 % | |")
    out.append(f"| the whole machine (other users too) | {1000 * (after.machine - before.machine) / served:.3f} | | |")
    threads = proccpu.per_thread_name(before, after)
    log("web workers' threads, CPU ms per request: " + ", ".join(
        f"{name} {1000 * seconds / served:.3f}" for name, seconds in sorted(threads.items(), key=lambda kv: -kv[1])))
    return "\n".join(out)


def open_table(results):
    out = ["| requests | sent/s | p50 ms | p95 ms | p99 ms | max ms | service p95 ms | errors | target | load avg | "
           "generator CPU % | server CPU ms per request |", "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for name, cell in results.items():
        target = ""
        if name in OPEN_TARGETS:
            met = cell["p95"] < OPEN_TARGETS[name]
            target = f"p95 < {OPEN_TARGETS[name]} ms: {'met' if met else '**missed**'}"
        server = f"{cell['server_cpu_ms']:.2f}" if ":" not in name else ""  # a run's whole, not a kind's
        out.append(f"| {name} | {cell['rate']:.0f} | {cell['p50']:.1f} | {cell['p95']:.1f} | {cell['p99']:.1f} | "
                   f"{cell['max']:.0f} | {cell['service_p95']:.1f} | {cell['errors']} | {target} | {cell['load']:.2f} | "
                   f"{cell['load_cpu']:.0f} | {server} |")
    return "\n".join(out)


def open_header(command, args, jobs):
    mix = ", ".join(f"{kind} {weight} %" for kind, weight in MIX.items())
    each = (f"/healthz at {args.rate}/s (baseline, the mix's peer), the mix at {args.rate}/s ({mix}), then the "
            f"history pages alone" if args.only != "history" else
            f"/healthz at {args.history_rate}/s (baseline), then the history pages alone (`--only history`: no mix)")
    return (f"**Open loop** (issue 38). {machine()}; PostgreSQL, Redis and the load generator on the same "
            f"machine.  \nweb: `{command}` (WEB_CONCURRENCY={os.environ.get('WEB_CONCURRENCY', 'unset')}, "
            f"WEB_THREADS={os.environ.get('WEB_THREADS', 'unset')}).  \n"
            f"{args.executions:,} executions, {jobs:,} jobs. Each run: {each} at "
            f"{args.history_rate}/s; {args.open_connections} connections (history: {max(1, args.open_connections // 5)}); "
            f"median of {args.runs} runs of {args.seconds} s, the first second left out. Latency from the "
            f"scheduled send time (no coordinated omission); service p95 from the actual send. load avg: "
            f"1-minute load average after each run; generator CPU: the load generator's own CPU, % of one core.")


def provenance():
    """The date and the commit a table's figures come from."""
    commit = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                            text=True).stdout.strip() or "unknown"
    return f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {commit}"


# --- the web process -----------------------------------------------------------------------

def procfile_web_command():
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.startswith("web:"):
            return line.split(":", 1)[1].strip()
    sys.exit("no web line in the Procfile")


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_web(port, logfile):
    """The Procfile's web line through a shell, as honcho/Heroku run it."""
    command = procfile_web_command()
    env = {**os.environ, "PORT": str(port), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}"}
    process = subprocess.Popen(["sh", "-c", f"exec {command}"], cwd=ROOT, env=env, stdout=logfile,
                               stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            sys.exit(f"the web process exited with {process.returncode}; see {logfile.name}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                if response.status == 200:
                    return process, command
        except OSError:
            time.sleep(0.3)
    stop(process)
    sys.exit("the web process did not answer /healthz within 60 s")


def stop(process):
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)  # our own session: the server's main process and workers
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# --- wrk ---------------------------------------------------------------------------------

def run_wrk(url, script, connections, seconds, env, *, paced=False):
    """One wrk run. Paced clients get a wrk thread each: common.lua then times each request
    itself, leaving out the start-up (BENCH_WARMUP_MS)."""
    threads = connections if paced else min(2, connections)
    command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s",
               "-s", str(WRK_DIR / script), url]
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **env}, timeout=seconds + 60)
    for line in result.stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            figures = json.loads(line.split(" ", 1)[1])
            figures["rps"] = figures["requests"] / (figures["duration_us"] / 1e6)
            figures["errors"] = sum(figures[k] for k in ("connect_errors", "read_errors", "write_errors",
                                                         "timeouts", "non_2xx"))
            return figures
    raise RuntimeError(f"wrk gave no result: {result.stdout}\n{result.stderr}")


def wait_until_idle(port, limit=60.0):
    """wrk stops with requests still queued in the server (seconds of them at 100 connections):
    let them drain, or they would be billed to the next cell. Idle = /healthz answers fast."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        started = time.monotonic()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=limit):
                pass
        except OSError:
            pass
        if time.monotonic() - started < 0.05:
            return
        time.sleep(0.2)


def log_cell(name, clients, cell):
    log(f"{name:16} c={clients:<4} {cell['rps']:7.0f} req/s  p50 {ms(cell['p50_us'])} ms  "
        f"p95 {ms(cell['p95_us'])} ms  p99 {ms(cell['p99_us'])} ms  errors {cell['errors']:.0f}  "
        f"load {cell['load']:.2f}")


def median_of(runs):
    return {key: statistics.median(run[key] for run in runs) for key in ("rps", "p50_us", "p95_us", "p99_us")} | {
        "errors": max(run["errors"] for run in runs), "load": statistics.median(run["load"] for run in runs)}


# --- report ------------------------------------------------------------------------------

def ms(us):
    return f"{us / 1000:.1f}"


def table(results, connections_list, paced):
    out = ["| scenario | clients | req/s | p50 ms | p95 ms | p99 ms | errors | target | load avg |",
           "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for name in SCENARIOS:
        for connections in [*connections_list, PACED]:
            cell = results.get((name, connections))
            if cell is None:
                continue
            target = ""
            if not cell["rps"]:
                target = "**no answer** in the run"
            elif connections == PACED and name in TARGETS:
                met = cell["p95_us"] / 1000 < TARGETS[name]
                target = f"p95 < {TARGETS[name]} ms: {'met' if met else '**missed**'}"
            if name == "read" and connections_list and connections == max(connections_list):
                best = max(results[(name, c)]["rps"] for c in connections_list if (name, c) in results)
                target = (target + "; " if target else "") + \
                    f"≥ {READS_PER_SECOND}/s: {'met' if best >= READS_PER_SECOND else '**missed**'} ({best:.0f}/s best)"
            clients = f"{paced} paced" if connections == PACED else str(connections)
            out.append(f"| {name} | {clients} | {cell['rps']:.0f} | {ms(cell['p50_us'])} | {ms(cell['p95_us'])} | "
                       f"{ms(cell['p99_us'])} | {cell['errors']:.0f} | {target} | {cell['load']:.2f} |")
    return "\n".join(out)


README_START = "<!-- bench_api figures:start -->"
README_END = "<!-- bench_api figures:end -->"


def write_readme(text, command):
    path = ROOT / "bench" / "README.md"
    block = f"{README_START}\nLatest full run, produced by\n\n```sh\n{command}\n```\n\n{text}\n{README_END}"
    current = path.read_text() if path.exists() else "# Benchmarks\n"
    if README_START in current and README_END in current:
        head, rest = current.split(README_START, 1)
        _, tail = rest.split(README_END, 1)
        path.write_text(head + block + tail)
    else:
        path.write_text(current.rstrip() + "\n\n## API (bench_api.py)\n\n" + block + "\n")


def machine():
    cpus = os.cpu_count()
    model = ""
    try:
        model = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{platform.system()} {platform.machine()}, {cpus} CPUs ({model}), Python {platform.python_version()}"


# --- main --------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--executions", type=int, default=1_000_000, help="executions in the table")
    parser.add_argument("--jobs", type=int, default=1000, help="jobs of the bench tenant (reads pick among them)")
    parser.add_argument("--connections", default="20,100",
                        help="closed-loop wrk connections, comma-separated; empty: paced clients only")
    parser.add_argument("--runs", type=int, default=3, help="wrk runs per cell (median)")
    parser.add_argument("--seconds", type=int, default=10, help="length of each wrk run")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help="which scenarios, comma-separated")
    parser.add_argument("--paced", type=int, default=20,
                        help="paced clients (each waits --think-ms between requests), whose p95 the latency "
                             "targets are checked on; 0: none")
    parser.add_argument("--think-ms", type=int, default=1000, help="paced clients' think time (0.5x to 1.5x)")
    parser.add_argument("--mode", choices=("open", "closed", "both", "costs", "cpu"), default="open",
                        help="open: the mix at a fixed --rate (issue 38's target); closed: each scenario "
                             "alone in wrk's closed loop and paced clients (issue 6's); costs: only the "
                             "cost of each kind of request in this process (no server: figures a busy "
                             "machine does not move); cpu: CPU per request of each process of the stack "
                             "while the server serves the mix at --rate")
    parser.add_argument("--rate", type=int, default=500, help="open loop: requests per second of the mix")
    parser.add_argument("--history-rate", type=int, default=100, help="open loop: history pages per second")
    parser.add_argument("--open-connections", type=int, default=50, help="open loop: keep-alive connections")
    parser.add_argument("--only", choices=("history",), default=None,
                        help="open loop: only the history pages (baseline at --history-rate, no mix; costs of "
                             "the history kinds only; no README figures unless --readme)")
    parser.add_argument("--quick", action="store_true", help="100k executions, 1 run of 5 s per cell")
    parser.add_argument("--readme", action=argparse.BooleanOptionalAction, default=None,
                        help="write the figures into bench/README.md (default: yes unless --quick)")
    args = parser.parse_args()
    if args.quick:
        args.executions, args.runs, args.seconds = min(args.executions, 100_000), 1, 5
    write = args.readme if args.readme is not None else not (args.quick or args.only)
    connections_list = [int(c) for c in args.connections.split(",") if c]
    scenarios = [s for s in args.scenarios.split(",") if s]
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        sys.exit(f"unknown scenarios: {', '.join(sorted(unknown))}")

    if args.mode in ("closed", "both"):
        ensure_wrk()
    prepare("postgres://postgres@127.0.0.1:5432/cronsvc_bench_api", "redis://127.0.0.1:6379/4")
    run_id = str(int(time.time()))
    org, project, small_project, key, job_ids = prepare_tenant(args.jobs, run_id)
    load_executions(org, job_ids, args.executions)
    vacuum_analyze()
    cursor = deep_cursor(org, args.executions // 2)

    paths = {
        "baseline": "/healthz",
        "read": f"/api/v1/jobs/{job_ids[0]}/",
        "list": "/api/v1/jobs/?page_size=50",
        "executions": "/api/v1/executions/?page_size=50",
        "executions_deep": f"/api/v1/executions/?page_size=50&cursor={cursor}",
        "create": "/api/v1/jobs/",
    }
    context = {"job_ids": job_ids, "project": str(project.pk), "small_project": str(small_project.pk),
               "cursor": cursor, "run_id": run_id}
    explain = explain_executions_list(key, history_explain_paths(context))
    print(explain, flush=True)
    kinds = HISTORY_KINDS if args.only else tuple(dict.fromkeys((*MIX, *HISTORY_KINDS)))
    costs = request_costs(key, context, org, kinds=kinds) if args.mode not in ("closed", "cpu") else {}
    if args.mode == "costs":
        print(costs_table(costs))
        return

    workdir = Path(tempfile.mkdtemp(prefix="bench-api-"))
    read_paths = workdir / "read_paths.txt"
    read_paths.write_text("\n".join(f"/api/v1/jobs/{pk}/" for pk in job_ids) + "\n")
    port = free_port()
    logfile = open(workdir / "web.log", "w")
    web, command = start_web(port, logfile)
    log(f"web: {command} (PORT={port}, WEB_CONCURRENCY={os.environ.get('WEB_CONCURRENCY', 'unset')})")
    results, opened = {}, {}
    try:
        if args.mode == "cpu":
            print(cpu_split(port, key, args, context, web))
            return
        if args.mode != "closed":
            opened = open_loop(port, key, args, context, org, web)
        for name in (scenarios if args.mode != "open" else []):
            env = {"BENCH_WRK_DIR": str(WRK_DIR), "BENCH_API_KEY": "" if name == "baseline" else key,
                   "BENCH_PATHS": str(read_paths) if name == "read" else "", "BENCH_PROJECT": str(project.pk),
                   "BENCH_RUN": run_id}
            script = "create.lua" if name == "create" else "get.lua"
            url = f"http://127.0.0.1:{port}{paths[name]}"
            run_wrk(url, script, (connections_list or [args.paced])[0], 2, env)  # warm-up: caches, imports
            wait_until_idle(port)
            for connections in connections_list:
                runs = []
                for _ in range(args.runs):
                    figures = run_wrk(url, script, connections, args.seconds, env)
                    figures["load"] = os.getloadavg()[0]
                    runs.append(figures)
                    wait_until_idle(port)
                results[(name, connections)] = cell = median_of(runs)
                log_cell(name, connections, cell)
            if args.paced:  # /healthz too: this machine's floor for a request after a pause
                paced_env = {**env, "BENCH_THINK_MS": str(args.think_ms), "BENCH_WARMUP_MS": str(WARMUP_MS)}
                runs = []
                for _ in range(args.runs):
                    figures = run_wrk(url, script, args.paced, max(args.seconds, PACED_SECONDS), paced_env,
                                      paced=True)
                    figures["load"] = os.getloadavg()[0]
                    runs.append(figures)
                results[(name, PACED)] = cell = median_of(runs)
                log_cell(name, f"{args.paced}p", cell)
    finally:
        stop(web)
        logfile.close()
        forget_bench_writes(org)

    header = (f"{machine()}; PostgreSQL and Redis on the same machine; wrk on the same machine (2 threads).  \n"
              f"web: `{command}` (WEB_CONCURRENCY={os.environ.get('WEB_CONCURRENCY', f'unset: {os.cpu_count()} cores')}, WEB_THREADS={os.environ.get('WEB_THREADS', 'unset: 2')}).  \n"
              f"{args.executions:,} executions, {len(job_ids):,} jobs; median of {args.runs} runs of {args.seconds} s "
              f"per cell; load avg = 1-minute load average at the end of each run (other processes included).  \n"
              f"Clients {', '.join(map(str, connections_list))}: closed loop (each connection sends its next request "
              f"as soon as the answer arrives: the throughput at saturation, latency = clients / throughput). "
              f"{args.paced} paced: each client waits {args.think_ms} ms (0.5x-1.5x) between requests, like a "
              f"load-test user (locust's wait_time); the latency targets are checked on these rows, the "
              f"{READS_PER_SECOND} reads/s on the closed-loop ones.")
    blocks = [f"{provenance()}.", ""]
    if opened:
        blocks += [open_header(command, args, len(job_ids)), "", open_table(opened), "",
                   "Cost of each kind of request in the bench process (Django's test client, no server; the "
                   "SQL statements and Python calls do not depend on the machine's load):", "",
                   costs_table(costs), ""]
    if results:
        blocks += [header, "", table(results, connections_list, args.paced), ""]
    text = "\n".join([*blocks,
                      "<details><summary>Executions list: SQL and EXPLAIN ANALYZE</summary>", "", "```",
                      explain, "```", "</details>", ""])
    print()
    print(text)
    if write:
        argv = " ".join(sys.argv[1:])
        write_readme(text, f"make bench  # or: .venv/bin/python bench/bench_api.py {argv}".rstrip())
        log("figures written to bench/README.md")


if __name__ == "__main__":
    main()
