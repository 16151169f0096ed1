"""Scheduler benchmark (issues 4 and 38): dispatch throughput of a burst while a real
worker consumes (lost and doubled occurrences checked in the database after every run,
with and without the pre-burst vacuum), BullMQ job schedulers and celery-redbeat on the
same burst in the same run (their consumers sending the same HTTP requests), dispatch lag at a steady rate, RSS, and the
django-celery-beat DatabaseScheduler as a baseline, on real PostgreSQL and Redis.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_bench \\
    REDIS_URL=redis://127.0.0.1:6379/5 SECRET_KEY=bench \\
    .venv/bin/python bench/bench_scheduler.py [--sizes 10000,100000,1000000] [--quick]

The peers need ``make bench-peers`` (celery-redbeat from requirements/bench.txt, BullMQ
from bench/peers/bullmq/package-lock.json); ``--peer-sizes ''`` skips them.

The database named in DATABASE_URL is created and migrated when missing and its job and
execution tables are emptied: it must be a database of its own (its name must contain
"bench"). The Redis DB index of REDIS_URL is flushed between runs: it must not be 0 (the
tests' index). Prints figures only; it never passes or fails on a timing. See
bench/README.md for the method and the latest figures.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import platform
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchenv import log, prepare  # noqa: E402 - bench/ is on sys.path: run as a script
import proccpu  # noqa: E402 - the same
UTC = timezone.utc

# --- the workload ------------------------------------------------------------------------

# (expression, weight): minute-level and hourly jobs dominate real cron tables.
CRON_EXPRESSIONS = [
    ("*/5 * * * *", 12), ("0 * * * *", 12), ("* * * * *", 6), ("*/15 * * * *", 8),
    ("0 3 * * *", 8), ("30 2 * * 1-5", 5), ("0 9 1 * *", 3), ("0 0 L * *", 2),
    ("15 10 * * MON#2", 2), ("0 */6 * * *", 6), ("*/15 9-17 * * 1-5", 6), ("0 12 15W * *", 2),
    ("@daily", 6), ("@hourly", 6), ("*/10 * * * *", 8), ("0 8,12,18 * * *", 5), ("0 0 * * SUN", 3),
]
# celery's crontab lacks L, W, # and macros: the beat baseline gets the nearest equivalent.
BEAT_CRON = {
    "0 0 L * *": "0 0 28-31 * *", "15 10 * * MON#2": "15 10 * * 1", "0 12 15W * *": "0 12 15 * *",
    "@daily": "0 0 * * *", "@hourly": "0 * * * *",
}
INTERVALS = [(60, 10), (300, 20), (600, 15), (900, 10), (1800, 10), (3600, 20), (86400, 15)]
TIMEZONES = [
    ("UTC", 35), ("America/New_York", 12), ("Europe/London", 8), ("Europe/Berlin", 10),
    ("Asia/Kolkata", 6), ("Asia/Tokyo", 6), ("America/Sao_Paulo", 5), ("Australia/Sydney", 5),
    ("America/Los_Angeles", 8), ("Australia/Lord_Howe", 1), ("Asia/Kathmandu", 1), ("Europe/Paris", 3),
]
SCHEDULE_TYPES = [("cron", 75), ("interval", 22), ("once", 3)]
MISFIRE = [("run_once", 90), ("run_all", 5), ("skip", 5)]
OVERLAP = [("allow", 95), ("forbid", 5)]
# (plan code, share of organizations, jobs weight per organization)
PLANS = [("free", 50, 1), ("pro", 30, 8), ("business", 15, 40), ("enterprise", 5, 300)]
JOBS_PER_ORG = 100          # organizations = max(20, N / JOBS_PER_ORG)
SUSPENDED_ORGS = 0.01       # their jobs come due too, and advance without running
DISABLED_JOBS = 0.03        # paused: in the table, not in the due index

STEADY_RATE = 1000          # due jobs per second in the lag measurement
BEAT_TASK = "bench.beat_job"


def weighted(rng, pairs, k):
    values, weights = zip(*pairs)
    return rng.choices(values, weights=weights, k=k)


# --- environment -------------------------------------------------------------------------

def sql(statement, params=None, fetch=False):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        if fetch:
            return cursor.fetchall()
    return None


def autocommit_sql(statement):
    """VACUUM and friends cannot run inside a transaction; Django runs in autocommit."""
    sql(statement)


# --- loading -----------------------------------------------------------------------------

def copy_rows(table, columns, lines):
    """COPY text-format lines (already tab-separated, \\N for NULL) into table."""
    from django.db import connection

    with connection.cursor() as cursor:
        with cursor.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
            buffer = io.StringIO()
            for n, line in enumerate(lines, 1):
                buffer.write(line)
                buffer.write("\n")
                if n % 20000 == 0:
                    copy.write(buffer.getvalue())
                    buffer = io.StringIO()
            copy.write(buffer.getvalue())


def ts(value):
    return value.isoformat() if value is not None else "\\N"


JOB_VARYING = [
    "id", "name", "enabled", "paused_reason", "schedule_type", "cron_expression", "interval_seconds", "run_at",
    "timezone", "start_at", "url", "method", "misfire_policy", "overlap_policy", "created_at",
    "updated_at", "organization_id", "project_id",
]


def copy_text(value):
    """A database-ready value in COPY's text format."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "obj") and type(value).__name__.startswith("Json"):  # psycopg's Jsonb adapter
        value = value.obj
    if isinstance(value, (dict, list)):
        value = json.dumps(value)
    text = str(value)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


class ModelCopy:
    """COPY rows of a Django model. Every column the bench does not vary gets the model's
    own default (computed once from an unsaved instance), so fields added to the models
    later need no change here."""

    def __init__(self, model, varying, **fixed):
        from django.db import connection

        template = model(**fixed)
        fields = list(model._meta.concrete_fields)
        self.table = model._meta.db_table
        self.columns = [f.column for f in fields]
        self.static = [
            None if f.column in varying
            else copy_text(f.get_db_prep_save(f.pre_save(template, add=True), connection))
            for f in fields
        ]
        self.slots = [self.columns.index(column) for column in varying]

    def line(self, values):
        row = self.static.copy()
        for index, value in zip(self.slots, values):
            row[index] = value
        return "\t".join(row)

    def copy(self, rows):
        copy_rows(self.table, self.columns, (self.line(values) for values in rows))


@dataclass
class Dataset:
    n: int
    orgs: int
    enabled: int
    load_seconds: float


def reset_tables():
    sql("TRUNCATE executions_attempt, executions_execution, jobs_jobdue, jobs_job, projects_project, "
        "accounts_organization, bench_job CASCADE")
    sql("TRUNCATE django_celery_beat_periodictask, django_celery_beat_crontabschedule, "
        "django_celery_beat_intervalschedule, django_celery_beat_clockedschedule CASCADE")


def load_jobs(n, target_url, seed=4):
    """N jobs across many organizations on every plan, calling the local sink at
    ``target_url``; none due (next_run_at from tomorrow on). bench_job(id, k) numbers the enabled jobs 0..M-1 in random order: the phases make
    jobs due by k."""
    from apps.accounts.models import Organization
    from apps.jobs.models import Job
    from apps.plans.models import Plan
    from apps.projects.models import Project
    from cronsvc.ids import uuid7

    rng = random.Random(seed)
    started = time.monotonic()
    sql("CREATE TABLE IF NOT EXISTS bench_job (id uuid PRIMARY KEY, k integer UNIQUE NOT NULL)")
    reset_tables()
    plans = {p.code: p.id for p in Plan.objects.all()}
    now = datetime.now(UTC).replace(microsecond=0)
    created = (now - timedelta(days=30)).isoformat()

    n_orgs = max(20, n // JOBS_PER_ORG)
    org_plan = weighted(rng, [(code, share) for code, share, _ in PLANS], n_orgs)
    org_weight = {code: w for code, _, w in PLANS}
    base_ms = int(now.timestamp() * 1000) - 30 * 86400 * 1000
    orgs = [(uuid7(base_ms + i), uuid7(base_ms + i), plan) for i, plan in enumerate(org_plan)]
    suspended = set(rng.sample(range(n_orgs), max(1, int(n_orgs * SUSPENDED_ORGS))))
    ModelCopy(Organization, ["id", "name", "slug", "plan_id", "suspended", "created_at"]).copy(
        (str(oid), f"Org {i}", f"org-{i}", str(plans[plan]), "t" if i in suspended else "f", created)
        for i, (oid, _, plan) in enumerate(orgs)
    )
    ModelCopy(Project, ["id", "organization_id", "name", "slug", "created_at"]).copy(
        (str(pid), str(oid), "Default", "default", created) for oid, pid, _ in orgs
    )

    org_of_job = rng.choices(range(n_orgs), weights=[org_weight[p] for _, _, p in orgs], k=n)
    kinds = weighted(rng, SCHEDULE_TYPES, n)
    crons = weighted(rng, CRON_EXPRESSIONS, n)
    intervals = weighted(rng, INTERVALS, n)
    zones = weighted(rng, TIMEZONES, n)
    misfire = weighted(rng, MISFIRE, n)
    overlap = weighted(rng, OVERLAP, n)
    # Not due during the benchmark: next_run_at spread over a week from tomorrow on.
    far = now + timedelta(days=1)
    job_ids = [uuid7(base_ms + 10_000_000 + i) for i in range(n)]
    eligible, due_rows = [], []

    def lines():
        for i in range(n):
            kind = kinds[i]
            enabled = rng.random() >= DISABLED_JOBS
            org = org_of_job[i]
            oid, pid, _ = orgs[org]
            next_at = far + timedelta(seconds=rng.randrange(7 * 86400))
            cron = crons[i] if kind == "cron" else ""
            interval = str(intervals[i]) if kind == "interval" else "\\N"
            start = ts(next_at) if kind == "interval" else "\\N"
            run_at = ts(next_at) if kind == "once" else "\\N"
            if enabled:
                eligible.append(job_ids[i])
                due_rows.append(f"{job_ids[i]}\t{ts(next_at)}")
            yield (
                str(job_ids[i]), f"job {i}", "t" if enabled else "f", "" if enabled else "paused", kind, cron,
                interval, run_at, zones[i], start, f"{target_url}/{i}", "POST" if i % 4 == 0 else "GET",
                misfire[i], overlap[i], created, created, str(oid), str(pid),
            )

    ModelCopy(Job, JOB_VARYING, jitter_seconds=0).copy(lines())
    copy_rows("jobs_jobdue", ["job_id", "next_run_at"], due_rows)  # the enabled jobs' due times
    rng.shuffle(eligible)
    copy_rows("bench_job", ["id", "k"], (f"{job_id}\t{k}" for k, job_id in enumerate(eligible)))
    autocommit_sql("VACUUM ANALYZE jobs_job")
    autocommit_sql("VACUUM ANALYZE jobs_jobdue")
    autocommit_sql("VACUUM ANALYZE bench_job")
    autocommit_sql("VACUUM ANALYZE accounts_organization")
    return Dataset(n=n, orgs=n_orgs, enabled=len(eligible), load_seconds=time.monotonic() - started)


def reset_jobs(touched, vacuum=True):
    """Between runs: no executions, the jobs an earlier run made due (k < touched) back in
    the far future, and (``vacuum``) the table vacuumed (autovacuum is off on the reference
    machine) so every run sees the same table. Returns the UPDATE's time per row."""
    sql("TRUNCATE executions_attempt, executions_execution CASCADE")
    started = time.monotonic()
    schedule_jobs(touched, "%s::timestamptz", [datetime.now(UTC) + timedelta(days=1)])
    per_row = (time.monotonic() - started) / max(1, touched)
    if vacuum:
        autocommit_sql("VACUUM ANALYZE jobs_job")
        autocommit_sql("VACUUM ANALYZE jobs_jobdue")
    return per_row


def schedule_jobs(count, at_of_k_sql, params):
    """Jobs k < count come due at ``at_of_k_sql`` (an SQL expression of b.k); interval
    jobs are anchored there and one-off jobs run there, so their next occurrence after
    it lies at least a minute later."""
    sql(
        f"""
        WITH v AS MATERIALIZED (SELECT b.id, {at_of_k_sql} AS at FROM bench_job b WHERE b.k < %s),
        due AS (UPDATE jobs_jobdue AS d SET next_run_at = v.at FROM v WHERE d.job_id = v.id)
        UPDATE jobs_job AS j SET
            start_at = CASE WHEN j.schedule_type = 'interval' THEN v.at ELSE j.start_at END,
            run_at = CASE WHEN j.schedule_type = 'once' THEN v.at ELSE j.run_at END,
            expired_at = NULL
        FROM v WHERE j.id = v.id
        """,
        [*params, count],
    )


def any_due(at):
    """Is a job due at ``at`` still unclaimed? (EXISTS: cheap while many are left.)"""
    return sql("SELECT EXISTS (SELECT 1 FROM jobs_jobdue WHERE next_run_at <= %s)", [at], fetch=True)[0][0]


def warm_up(ctx, count=1000):
    """Let freshly started schedulers dispatch ``count`` jobs once, then forget them: the
    figures are about a running scheduler, not about its first tick (connecting to the
    broker, loading the timezones' transitions: ~0.2 s once per process)."""
    schedule_jobs(count, "%s::timestamptz", [datetime.now(UTC) - timedelta(seconds=1)])
    deadline = time.time() + 60
    while any_due(datetime.now(UTC)) and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(0.3)  # the last tick publishes after its commit
    while any_unfinished() and time.time() < deadline:  # the worker (if any) has finished them
        time.sleep(0.1)
    sql("TRUNCATE executions_attempt, executions_execution CASCADE")
    schedule_jobs(count, "%s::timestamptz", [datetime.now(UTC) + timedelta(days=1)])
    ctx.broker.flush()


def queued_count():
    return sql("SELECT count(*) FROM executions_execution WHERE status = 'queued'", fetch=True)[0][0]


def any_unfinished():
    """Whether a run is still queued or running. Polled while the worker drains a burst: an
    EXISTS stops at the first such run, where a count read every one (22-54 ms of
    PostgreSQL's CPU every half second, taken from the run being measured)."""
    return sql("SELECT EXISTS (SELECT 1 FROM executions_execution WHERE status IN ('queued', 'running'))",
               fetch=True)[0][0]


# --- Redis -------------------------------------------------------------------------------

class Broker:
    def __init__(self, url):
        import redis

        self.client = redis.Redis.from_url(url)

    def flush(self):
        self.client.flushdb()

    def queues(self):
        from apps.plans.models import Plan

        return sorted(set(Plan.objects.values_list("queue", flat=True)) | {"default", "celery"})

    def drain(self, queues):
        """Take every pending message out of the queues (atomically per call)."""
        pipe = self.client.pipeline(transaction=True)
        for queue in queues:
            pipe.lrange(queue, 0, -1)
            pipe.delete(queue)
        replies = pipe.execute()
        return [raw for reply in replies[0::2] for raw in reply]

    def count(self, queues):
        pipe = self.client.pipeline(transaction=False)
        for queue in queues:
            pipe.llen(queue)
        return sum(pipe.execute())


def message_ids(raw):
    message = json.loads(raw)
    body = message["body"]
    if message.get("properties", {}).get("body_encoding") == "base64":
        body = base64.b64decode(body)
    args = json.loads(body)[0]
    return args[0] if args and isinstance(args[0], list) else args


# --- processes ---------------------------------------------------------------------------

class Child:
    def __init__(self, args, env, log_path, cwd=ROOT):
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.started = time.time()
        self.popen = subprocess.Popen(args, cwd=cwd, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                      start_new_session=True)

    def memory(self):
        """(VmHWM, VmRSS) in MiB, read from /proc."""
        values = {}
        try:
            with open(f"/proc/{self.popen.pid}/status") as status:
                for line in status:
                    if line.startswith(("VmHWM:", "VmRSS:")):
                        key, amount, _unit = line.split()
                        values[key[:-1]] = int(amount) / 1024
        except FileNotFoundError:
            pass
        return values.get("VmHWM", float("nan")), values.get("VmRSS", float("nan"))

    def stop(self, timeout=20):
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
        self.log.close()
        return self.popen.returncode

    def alive(self):
        return self.popen.poll() is None


def child_env(**extra):
    env = dict(os.environ)
    env.update(PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start_schedulers(count, workdir, tag, extra_env, no_worker=False):
    """``no_worker``: the bench drains the queues itself (the lag phase), so the sweeper
    waits an hour before it re-sends a run still queued (the default: a minute)."""
    env = child_env(**({"SWEEPER_REPUBLISH_AFTER": 3600} if no_worker else {}), **extra_env)
    return [
        Child([sys.executable, "manage.py", "run_scheduler"], env, workdir / f"{tag}-s{i}.log")
        for i in range(count)
    ]


def wait_connected(children, deadline):
    """Until every scheduler has its database connection (its loop has started)."""
    pids = {c.popen.pid for c in children}
    while time.time() < deadline:
        backends = sql("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                       "AND backend_type = 'client backend' AND pid <> pg_backend_pid()", fetch=True)[0][0]
        if backends >= len(pids):
            return True
        if not all(c.alive() for c in children):
            raise RuntimeError("a scheduler died: " + ", ".join(str(c.log_path) for c in children))
        time.sleep(0.1)
    return False


class CpuMeter:
    """CPU used by processes that are not part of the benchmark (other people's test
    runs on a shared machine), from /proc: the figures are only as good as the machine
    is quiet, so every run reports it, and runs wait for a quiet machine first.

    Ours: the bench process and every process descended from it (the sink, the workers'
    pool children, the peers), PostgreSQL's background processes and the backends of the
    bench database, Redis. Everything else is foreign."""

    TICK = proccpu.TICK

    def __init__(self, db_name):
        self.db_name = db_name
        self.ours = {os.getpid()}

    @staticmethod
    def _processes():
        return proccpu.processes()

    def _descends_from_ours(self, pid, parents):
        seen = set()
        while pid > 1 and pid not in seen:
            if pid in self.ours:
                return True
            seen.add(pid)
            pid = parents.get(pid, 0)
        return False

    def _is_ours(self, pid, cmdline, parents):
        if not cmdline or self._descends_from_ours(pid, parents):  # kernel threads have no command line
            return True
        if cmdline.startswith("postgres: "):
            # a backend reads "postgres: 15/main: <user> <database> <client(port)> <state>";
            # background processes (checkpointer, walwriter, ...) serve every database.
            words = cmdline.split()
            backend = len(words) >= 5 and ("(" in words[4] or words[4] == "[local]")
            return not backend or words[3] == self.db_name
        return cmdline.startswith(("redis-server", "/usr/lib/postgresql"))

    def start(self, pids=()):
        self.ours.update(pids)
        self.t0 = time.monotonic()
        self.before = self._processes()

    def foreign_share(self, pids=()):
        """Share of the machine's CPU (0..1) used by foreign processes since start()."""
        self.ours.update(pids)
        after = self._processes()
        elapsed = time.monotonic() - self.t0
        parents = {pid: parent for pid, (_, _, parent) in after.items()}
        foreign = 0
        for pid, (cmdline, ticks, _) in after.items():
            if self._is_ours(pid, cmdline, parents):
                continue
            foreign += ticks - self.before[pid][1] if pid in self.before else ticks
        return foreign / self.TICK / max(1e-9, elapsed * (os.cpu_count() or 1))

    def wait_quiet(self, threshold, timeout):
        """Wait (at most ``timeout`` s) until foreign processes use less than
        ``threshold`` of the machine over a 2-second sample. Returns the last sample."""
        deadline = time.monotonic() + timeout
        announced = False
        while True:
            self.start()
            time.sleep(2.0)
            share = self.foreign_share()
            if share < threshold or time.monotonic() > deadline:
                if announced or share >= threshold:
                    log(f"  machine {'quiet' if share < threshold else 'still busy'}: other processes use "
                        f"{share:.0%} of the CPUs")
                return share
            if not announced:
                log(f"  waiting for a quiet machine: other processes use {share:.0%} of the CPUs")
                announced = True


def sleep_until(moment):
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)


@dataclass
class Context:
    broker: Broker
    queues: list
    workdir: Path
    extra_env: dict
    cpu: CpuMeter
    quiet: float          # wait for foreign CPU below this share before a run (0: never)
    quiet_timeout: float
    target_url: str = ""  # the local sink every run calls; the peers' consumers too (--peer-work http)
    peer_work: str = "http"

    def prepare(self):
        """Before a run: an empty broker, a quiet machine, and a checkpoint so every run
        starts in the same WAL state (after a checkpoint each page's first change is
        logged in full, which is also PostgreSQL's steady state for a table this hot)."""
        self.broker.flush()
        if self.quiet:
            self.cpu.wait_quiet(self.quiet, self.quiet_timeout)
        autocommit_sql("CHECKPOINT")


# --- the worker and its target ----------------------------------------------------------

WORKER_CONCURRENCY = 3  # the Procfile's worker lines' default


def start_target(workdir):
    """The local HTTP sink of bench_delivery.py (answers 200 at once): the runs' target."""
    import bench_delivery

    return bench_delivery.start_target(workdir)


def start_worker(ctx, tag):
    """The Procfile's worker line (prefork, WORKER_CONCURRENCY processes), consuming every
    plan's queues, delivering to the local sink; returns once it is ready."""
    from apps.executions.routing import all_run_queues

    queues = ",".join(all_run_queues([q for q in ctx.queues if q not in ("default", "celery")]))
    args = [str(Path(sys.executable).with_name("celery")), "-A", "config", "worker", "--queues", queues,
            "--hostname", f"{tag}@%h", "--pool", "prefork", "--concurrency", str(WORKER_CONCURRENCY),
            "--loglevel", "INFO"]
    child = Child(args, child_env(OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", DELIVERY_HANDOFF_SECONDS=0.1,
                                  **ctx.extra_env), ctx.workdir / f"{tag}-worker.log")
    deadline = time.time() + 90
    while " ready." not in Path(child.log_path).read_text(errors="replace"):
        if time.time() > deadline or not child.alive():
            child.stop()
            raise RuntimeError(f"the worker did not start: see {child.log_path}")
        time.sleep(0.2)
    return child


# --- phase 1: throughput -----------------------------------------------------------------

@dataclass
class ThroughputRun:
    procs: int
    due: int            # occurrences of the burst expected (enabled jobs, organization not suspended)
    dispatched: int     # occurrences of the burst recorded and published
    seconds: float      # from T until the last claim of the burst committed
    vacuumed: bool = True
    rss_peak: list = field(default_factory=list)
    lost: int = 0       # expected occurrences with no run (nor a skip) recorded
    unfinished: int = 0  # runs of the burst the worker had not finished when the bench stopped waiting
    skipped: int = 0    # occurrences recorded as skipped (misfire policy skip, overlap forbid)
    retried: int = 0    # runs with more than one attempt (a retry after a failed connection is no double)
    received: int = 0   # runs of the burst the worker had taken (claimed) when the bench stopped waiting
    doubled: int = 0    # occurrences delivered more than once (attempts) or recorded twice
    other_runs: int = 0  # runs of other occurrences meanwhile (e.g. the next minute's): not counted
    claim_p50: float = float("nan")    # created_at (claim) - T
    claim_p99: float = float("nan")
    receipt_p50: float = float("nan")  # started_at (the worker's claim) - T
    receipt_p99: float = float("nan")
    received_seconds: float = float("nan")  # from T until the worker took the last one
    on_time_start: bool = True
    foreign: float = 0.0
    load: float = 0.0   # 1-minute load average at the end of the run

    @property
    def rate(self):
        return self.dispatched / self.seconds if self.seconds else 0.0

    @property
    def received_rate(self):
        return self.received / self.received_seconds if self.received_seconds == self.received_seconds else 0.0


def expected_burst(due):
    """Occurrences the burst must run: jobs k < due whose organization is not suspended."""
    return sql("""SELECT count(*) FROM bench_job b JOIN jobs_job j ON j.id = b.id
                  JOIN accounts_organization o ON o.id = j.organization_id
                  WHERE b.k < %s AND j.enabled AND NOT o.suspended""", [due], fetch=True)[0][0]


#: Attempt outcomes of a request that never reached the target.
UNSENT = ("connect_error", "dns_error")


def burst_figures(burst_at, due):
    """From the database once the worker is done: the burst's runs, the lost and doubled
    ones, and the claim and receipt times of every run of the burst."""
    expected = expected_burst(due)
    # A retry after an attempt that never reached the target (its connection failed: the
    # sink refuses connections when the machine is overloaded) is a retry, not a double.
    (runs, recorded, unfinished, doubled_attempts, retried, other) = sql(
        """SELECT count(*) FILTER (WHERE e.scheduled_for = %(at)s AND e.status <> 'skipped'),
                  count(DISTINCT e.job_id) FILTER (WHERE e.scheduled_for = %(at)s),
                  count(*) FILTER (WHERE e.scheduled_for = %(at)s AND e.status IN ('queued', 'running')),
                  count(*) FILTER (WHERE e.scheduled_for = %(at)s AND (SELECT count(*) FROM executions_attempt a
                                   WHERE a.execution_id = e.id AND a.error_kind <> ALL(%(unsent)s)) > 1),
                  count(*) FILTER (WHERE e.scheduled_for = %(at)s AND e.attempt > 1),
                  count(*) FILTER (WHERE e.scheduled_for <> %(at)s)
           FROM executions_execution e""", {"at": burst_at, "unsent": list(UNSENT)}, fetch=True)[0]
    twice = sql("""SELECT count(*) FROM (SELECT job_id FROM executions_execution WHERE scheduled_for = %s
                   GROUP BY job_id HAVING count(*) > 1) t""", [burst_at], fetch=True)[0][0]
    # created_at: the claim's time (published_at moves when a run is published again, e.g.
    # after the worker held it back for its plan's concurrency limit).
    times = sql("""SELECT extract(epoch FROM created_at - scheduled_for), extract(epoch FROM started_at - scheduled_for)
                   FROM executions_execution WHERE scheduled_for = %s AND status <> 'skipped'""",
                [burst_at], fetch=True)
    claims = sorted(float(c) for c, _ in times if c is not None)
    receipts = sorted(float(r) for _, r in times if r is not None)
    return {
        "expected": expected, "runs": runs, "lost": expected - recorded, "unfinished": unfinished,
        "skipped": recorded - runs, "doubled": doubled_attempts + twice, "retried": retried,
        "other_runs": other, "claim_p50": percentile(claims, 50), "claim_p99": percentile(claims, 99),
        "receipt_p50": percentile(receipts, 50), "receipt_p99": percentile(receipts, 99),
        "received_seconds": receipts[-1] if receipts else float("nan"), "received": len(receipts),
    }


def profile(children, tag):
    """BENCH_PROFILE=<seconds>: py-spy samples the first scheduler from T on for that long
    (collapsed stacks in the logs' folder, <tag>-s0.pyspy)."""
    seconds = os.environ.get("BENCH_PROFILE")
    if seconds:
        pyspy = Path(sys.executable).with_name("py-spy")
        subprocess.Popen([str(pyspy), "record", "--pid", str(children[0].popen.pid), "--duration", seconds,
                          "--rate", "200", "--format", "raw", "--output",
                          str(children[0].log_path.with_name(f"{tag}-s0.pyspy"))],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_throughput(ctx, due, procs, tag, timeout, vacuum=True, drain_timeout=None):
    """``due`` jobs all come due at the same instant T; ``procs`` schedulers, started
    beforehand and idle, dispatch them while a worker consumes. Measured from outside:
    from T until no job is due at T any more (the last claim of the burst committed; its
    publish follows at once). Then, once the worker has finished every run, the lost and
    doubled occurrences and the claim and receipt lags, from the database."""
    update_per_row = reset_jobs(due, vacuum=vacuum)
    ctx.prepare()
    children = start_schedulers(procs, ctx.workdir, tag, ctx.extra_env)
    worker = start_worker(ctx, tag)
    try:
        wait_connected(children, time.time() + 60)
        warm_up(ctx)
        # T leaves time for the UPDATE (as long as the same one in reset_jobs, with some
        # room) and for idle schedulers, who look at the due index every second at most;
        # and it lies early in a minute, so that the burst is over before every-minute jobs
        # come due again (their runs are counted apart anyway).
        now = time.time()
        earliest = now + 1.5 + 2 * due * update_per_row
        at = max(earliest, (earliest // 60) * 60 + 1)
        if at > (earliest // 60) * 60 + 15:
            at = (earliest // 60 + 1) * 60 + 1
        burst_at = datetime.fromtimestamp(at, UTC)
        schedule_jobs(due, "%s::timestamptz", [burst_at])
        committed = time.time()
        t0 = at
        sleep_until(t0)
        ctx.cpu.start([c.popen.pid for c in children] + [worker.popen.pid])
        profile(children, tag)
        dispatched_at = None
        while time.time() - t0 < timeout:
            if not any_due(burst_at):
                dispatched_at = time.time()
                break
            time.sleep(0.02)
        else:
            log(f"  timeout: jobs due at T are left after {timeout:.0f} s")
        foreign = ctx.cpu.foreign_share()
        rss = [c.memory()[0] for c in children]
        deadline = time.time() + (drain_timeout or max(120.0, due / 200))
        while any_unfinished() and time.time() < deadline:
            time.sleep(0.5)
        time.sleep(1.0)  # a late duplicate would show now
        figures = burst_figures(burst_at, due)
        load = os.getloadavg()[0]
    finally:
        codes = [c.stop() for c in children]
        worker.stop(timeout=30)
    if any(code != 0 for code in codes):
        log(f"  warning: scheduler exit codes {codes} (logs in {ctx.workdir})")
    seconds = (dispatched_at - t0) if dispatched_at else float("nan")
    return ThroughputRun(
        procs=procs, due=figures["expected"], dispatched=figures["runs"], seconds=seconds, vacuumed=vacuum,
        rss_peak=rss, lost=figures["lost"], unfinished=figures["unfinished"], skipped=figures["skipped"],
        doubled=figures["doubled"], retried=figures["retried"], received=figures["received"], other_runs=figures["other_runs"],
        claim_p50=figures["claim_p50"], claim_p99=figures["claim_p99"], receipt_p50=figures["receipt_p50"],
        receipt_p99=figures["receipt_p99"], received_seconds=figures["received_seconds"],
        on_time_start=committed <= at, foreign=foreign, load=load)


# --- phase 2: lag at a steady rate -------------------------------------------------------

@dataclass
class LagRun:
    procs: int
    jobs: int
    seconds: float
    dispatched: int
    p50: float
    p99: float
    max: float
    rate: float
    rss_peak: list = field(default_factory=list)
    foreign: float = 0.0


def run_lag(ctx, eligible, procs, tag, duration, touched):
    """STEADY_RATE jobs come due each second for ``duration`` seconds (evenly spread);
    the bench pops messages as they arrive (BLPOP) and stamps their arrival, an upper
    bound of their publish time. lag = arrival - scheduled_for (jitter 0). The window
    lies inside one wall-clock minute so no cron job comes due a second time in it."""
    jobs = min(eligible, int(STEADY_RATE * duration))
    duration = jobs / STEADY_RATE
    update_per_row = reset_jobs(touched)
    ctx.prepare()
    children = start_schedulers(procs, ctx.workdir, tag, ctx.extra_env, no_worker=True)
    arrivals = []  # (arrival, [ids])
    try:
        wait_connected(children, time.time() + 60)
        warm_up(ctx)
        now = time.time()
        start = (now // 60 + 1) * 60 + 2
        if start - now < 2 + 2 * jobs * update_per_row:
            start += 60
        schedule_jobs(jobs, "%s::timestamptz + b.k * interval '1 microsecond' * %s",
                      [datetime.fromtimestamp(start, UTC), 1e6 / STEADY_RATE])
        sleep_until(start)
        ctx.cpu.start([c.popen.pid for c in children])
        end = start + duration
        expected = None
        last_check = 0.0
        received = 0
        while True:
            item = ctx.broker.client.blpop(ctx.queues, timeout=0.2)
            now = time.time()
            if item is not None:
                ids = message_ids(item[1])
                arrivals.append((now, ids))
                received += len(ids)
            if now > end and now - last_check > 0.5 and expected is None:
                last_check = now
                if not any_due(datetime.fromtimestamp(end, UTC)):
                    expected = queued_count()
            if expected is not None and received >= expected:
                break
            if now > end + 60:
                log(f"  lag run timeout: {received} received, expected {expected}")
                break
        foreign = ctx.cpu.foreign_share()
        rss = [c.memory()[0] for c in children]
    finally:
        for c in children:
            c.stop()
    due_of = dict(sql("SELECT id::text, scheduled_for FROM executions_execution WHERE status = 'queued'",
                      fetch=True))
    lags = sorted(arrival - due_of[i].timestamp() for arrival, ids in arrivals for i in ids if i in due_of)
    if not lags:
        return LagRun(procs, jobs, duration, 0, float("nan"), float("nan"), float("nan"), 0.0, rss, foreign)
    first_due = min(due_of[i].timestamp() for _, ids in arrivals for i in ids if i in due_of)
    last = max(arrival for arrival, _ in arrivals)
    return LagRun(
        procs=procs, jobs=jobs, seconds=duration, dispatched=len(lags),
        p50=percentile(lags, 50), p99=percentile(lags, 99), max=lags[-1],
        rate=len(lags) / max(1e-9, last - first_due), rss_peak=rss, foreign=foreign,
    )


def percentile(sorted_values, pct):
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(pct / 100 * (len(sorted_values) - 1))))
    return sorted_values[index]


# --- phase 3: django-celery-beat baseline ------------------------------------------------

@dataclass
class BeatRun:
    tasks: int
    due: int
    startup: float
    published: int
    rate: float
    window: float
    rss_peak: float
    finished: bool
    foreign: float = 0.0


def load_beat_tasks(due):
    """One PeriodicTask per enabled job (same schedules, same plan queues; disabled for a
    suspended organization); the same ``due`` jobs (k < due) are overdue, the others ran
    just now. Returns (tasks, enabled tasks due)."""
    from django_celery_beat.models import ClockedSchedule, CrontabSchedule, IntervalSchedule

    sql("TRUNCATE django_celery_beat_periodictask, django_celery_beat_crontabschedule, "
        "django_celery_beat_intervalschedule, django_celery_beat_clockedschedule CASCADE")
    rows = sql(
        """SELECT j.id::text, b.k, j.schedule_type, j.cron_expression, j.interval_seconds, j.timezone,
                  p.queue, o.suspended
           FROM jobs_job j JOIN bench_job b ON b.id = j.id
           JOIN accounts_organization o ON o.id = j.organization_id JOIN billing_plan p ON p.id = o.plan_id
           ORDER BY b.k""",
        fetch=True,
    )
    crontabs, intervals = {}, {}
    for _, _, kind, expression, seconds, zone, _, _ in rows:
        if kind == "cron":
            key = (BEAT_CRON.get(expression, expression), zone)
            if key not in crontabs:
                minute, hour, dom, month, dow = key[0].split()
                crontabs[key] = CrontabSchedule.objects.create(
                    minute=minute, hour=hour, day_of_month=dom, month_of_year=month, day_of_week=dow,
                    timezone=zone).id
        elif kind == "interval" and seconds not in intervals:
            intervals[seconds] = IntervalSchedule.objects.create(every=seconds, period="seconds").id
    now = datetime.now(UTC)
    overdue = ts(now - timedelta(days=40))
    recent = ts(now)
    once_rows = [r for r in rows if r[2] == "once"]
    clocked = ClockedSchedule.objects.bulk_create(
        [ClockedSchedule(clocked_time=now - timedelta(minutes=1) if r[1] < due else now + timedelta(days=2))
         for r in once_rows])
    clocked_of = {r[0]: c.id for r, c in zip(once_rows, clocked)}

    def lines():
        for job_id, k, kind, expression, seconds, zone, queue, suspended in rows:
            crontab = crontabs.get((BEAT_CRON.get(expression, expression), zone)) if kind == "cron" else None
            interval = intervals.get(seconds) if kind == "interval" else None
            clock = clocked_of.get(job_id)
            last_run = overdue if k < due else recent
            yield "\t".join((
                f"job-{job_id}", BEAT_TASK, json.dumps([job_id]), "{}", queue, "\\N", "\\N", "\\N",
                "f" if suspended else "t",
                "\\N" if clock else last_run, "0", recent, "",
                str(crontab) if crontab else "\\N", str(interval) if interval else "\\N", "\\N",
                "t" if clock else "f", "\\N", "\\N", "{}", str(clock) if clock else "\\N", "\\N",
            ))

    copy_rows(
        "django_celery_beat_periodictask",
        ["name", "task", "args", "kwargs", "queue", "exchange", "routing_key", "expires", "enabled",
         "last_run_at", "total_run_count", "date_changed", "description", "crontab_id", "interval_id",
         "solar_id", "one_off", "start_time", "priority", "headers", "clocked_id", "expire_seconds"],
        lines(),
    )
    sql("DELETE FROM django_celery_beat_periodictasks")
    autocommit_sql("VACUUM ANALYZE django_celery_beat_periodictask")
    return len(rows), sum(1 for row in rows if row[1] < due and not row[7])


def run_beat(ctx, tasks, due, tag, window):
    """celery beat with django-celery-beat's DatabaseScheduler on the same broker: start-up
    (spawn to first message), messages per second while due entries remain, peak RSS."""
    ctx.prepare()
    env = child_env()
    beat_dir = Path(tempfile.mkdtemp(prefix="beat-", dir=ctx.workdir))
    args = [str(Path(sys.executable).with_name("celery")), "-A", "config", "beat", "--scheduler",
            "django_celery_beat.schedulers:DatabaseScheduler", "--loglevel", "INFO",
            "--pidfile", str(beat_dir / "beat.pid")]
    child = Child(args, env, ctx.workdir / f"{tag}-beat.log", cwd=beat_dir)
    ctx.cpu.start([child.popen.pid])
    spawned = child.started
    first = last_growth = None
    count = last_count = 0
    try:
        while True:
            now = time.time()
            count = ctx.broker.count(ctx.queues)
            if count and first is None:
                first = now
            if count > last_count:
                last_growth, last_count = now, count
            if not child.alive():
                log("  beat exited early: see " + str(child.log_path))
                break
            if count >= due or now - spawned > window:
                break
            time.sleep(0.05)
        foreign = ctx.cpu.foreign_share()
        rss = child.memory()[0]
    finally:
        child.stop(timeout=30)
    if first is None:
        return BeatRun(tasks, due, float("nan"), 0, 0.0, window, rss, False, foreign)
    span = (last_growth or first) - first
    rate = last_count / span if span > 0 else float("nan")
    return BeatRun(tasks=tasks, due=due, startup=first - spawned, published=last_count, rate=rate,
                   window=span, rss_peak=rss, finished=last_count >= due, foreign=foreign)


# --- phase 4: the peers users would pick instead ----------------------------------------

PEERS = ROOT / "bench" / "peers"
BULLMQ_CONCURRENCY = 100
PEER_CONFIG = {
    "bullmq": f"BullMQ job schedulers (upsertJobScheduler, daily cron pattern with seconds), one Worker process, "
              f"concurrency {BULLMQ_CONCURRENCY}, removeOnComplete",
    "redbeat": "celery-redbeat RedBeatScheduler (one beat), one Celery worker with Celery's defaults (prefork, "
               "one process per core, prefetch 4); entries schedule(run_every=1 day)",
}


@dataclass
class PeerRun:
    peer: str
    n: int
    received: int
    seconds: float            # from T until the peer had nothing due at T left waiting (dispatch side)
    received_seconds: float   # from T until the consumer recorded the last one
    p50: float
    p99: float
    duplicates: int
    lost: int
    setup_seconds: float
    foreign: float = 0.0
    load: float = 0.0
    dispatched: int = None    # when the bound ended the run first: how many it had dispatched by then

    @property
    def rate(self):
        done = self.n if self.dispatched is None else self.dispatched
        return done / self.seconds if self.seconds and self.seconds == self.seconds else 0.0

    @property
    def received_rate(self):
        return self.received / self.received_seconds if self.received_seconds else 0.0


def peer_run(peer, n, lags, seconds, duplicates, lost, setup_seconds, foreign, dispatched=None):
    lags = sorted(lags)
    return PeerRun(peer=peer, n=n, received=len(lags), seconds=seconds, dispatched=dispatched,
                   received_seconds=lags[-1] if lags else float("nan"), p50=percentile(lags, 50),
                   p99=percentile(lags, 99), duplicates=duplicates, lost=lost, setup_seconds=setup_seconds,
                   foreign=foreign, load=os.getloadavg()[0])


def run_bullmq(ctx, n, timeout):
    """BullMQ (node, bench/peers/bullmq/peer.mjs): N job schedulers due at T, one Worker."""
    ctx.prepare()
    # Due after BullMQ has upserted every scheduler (README.md, "Figures behind the code").
    at = int(time.time() + 10 + n * 0.004)
    target = [ctx.target_url] if ctx.peer_work == "http" else []
    popen = subprocess.Popen(["node", "peer.mjs", os.environ["REDIS_URL"], str(n), str(at * 1000), str(timeout),
                              str(BULLMQ_CONCURRENCY), *target], cwd=PEERS / "bullmq", stdout=subprocess.PIPE,
                             stderr=open(ctx.workdir / f"bullmq-{n}.log", "ab"), start_new_session=True)
    ctx.cpu.start([popen.pid])
    out, _ = popen.communicate(timeout=at - time.time() + timeout + 120)
    foreign = ctx.cpu.foreign_share()
    data = json.loads(out.decode().strip().splitlines()[-1])
    if "error" in data:
        raise RuntimeError(f"bullmq: {data['error']}")
    seconds = data["dispatch_end_ms"] / 1000 if data["dispatch_end_ms"] is not None else float("nan")
    return peer_run("bullmq", n, [ms / 1000 for ms in data["lags"]], seconds, data["duplicates"], data["lost"],
                    data["upsert_seconds"], foreign)


def run_redbeat(ctx, n, timeout):
    """celery-redbeat (bench/peers/redbeat_peer.py): N entries due at T, one beat, one worker."""
    ctx.prepare()
    sys.path.insert(0, str(PEERS))
    os.environ["PEER_REDIS_URL"] = os.environ["REDIS_URL"]
    import redbeat_peer

    client = ctx.broker.client
    env = child_env(PEER_REDIS_URL=os.environ["REDIS_URL"], PYTHONPATH=str(PEERS),
                    PEER_TARGET_URL=ctx.target_url if ctx.peer_work == "http" else "")
    env.pop("DJANGO_SETTINGS_MODULE")  # Celery would load its Django fix-up: the peer has no Django
    celery = str(Path(sys.executable).with_name("celery"))
    worker = Child([celery, "-A", "redbeat_peer", "worker"], env, ctx.workdir / f"redbeat-{n}-worker.log",
                   cwd=ctx.workdir)
    beat = None
    try:
        deadline = time.time() + 60
        while not client.get(redbeat_peer.READY):
            if time.time() > deadline or not worker.alive():
                raise RuntimeError(f"the redbeat worker did not start: see {worker.log_path}")
            time.sleep(0.2)
        at = datetime.fromtimestamp(int(time.time() + 8 + n * 50e-6), UTC)
        started = time.monotonic()
        schedule_key = redbeat_peer.load_entries(n, at)
        setup = time.monotonic() - started
        beat = Child([celery, "-A", "redbeat_peer", "beat", "-S", "redbeat.RedBeatScheduler"], env,
                     ctx.workdir / f"redbeat-{n}-beat.log", cwd=ctx.workdir)
        ctx.cpu.start([worker.popen.pid, beat.popen.pid])
        sleep_until(at.timestamp())
        t0 = at.timestamp()
        dispatched_at = None
        dispatched = None
        while time.time() - t0 < timeout:
            if dispatched_at is None and not redbeat_peer.due_left(client, schedule_key, at):
                dispatched_at = time.time()
            if dispatched_at and client.llen(redbeat_peer.RECEIPTS) >= n:
                break
            time.sleep(0.02)
        else:
            if dispatched_at is None:  # bounded: its rate is what it dispatched within the bound
                dispatched = n - redbeat_peer.due_left(client, schedule_key, at)
                dispatched_at = time.time()
        time.sleep(2.0)  # a late duplicate would show now
        foreign = ctx.cpu.foreign_share()
        records = redbeat_peer.receipts(client)
    finally:
        if beat is not None:
            beat.stop()
        worker.stop()
    first = {}
    for name, when in records:
        first.setdefault(name, when)
    lags = [when - t0 for when in first.values()]
    seconds = dispatched_at - t0 if dispatched_at else float("nan")
    return peer_run("redbeat", n, lags, seconds, len(records) - len(first), n - len(first), setup, foreign,
                    dispatched)


# --- reporting ---------------------------------------------------------------------------

def machine():
    mem_kb = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal"))
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               platform.processor())
    pg = sql("SHOW server_version", fetch=True)[0][0]
    import celery
    from django.conf import settings
    import django
    import django_celery_beat
    import redis as redis_py

    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    return {
        "commit": (git("rev-parse", "--short", "HEAD") or "unknown") + dirty,
        "load_at_start": "{:.1f} / {:.1f} / {:.1f}".format(*os.getloadavg()),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": os.cpu_count(),
        "cpu": cpu,
        "memory": f"{mem_kb / 1024 / 1024:.1f} GiB",
        "python": platform.python_version(),
        "postgres": pg,
        "redis": redis_py.Redis.from_url(os.environ["REDIS_URL"]).info("server")["redis_version"],
        "versions": f"Django {django.__version__}, Celery {celery.__version__}, "
                    f"django-celery-beat {django_celery_beat.__version__}",
        "autovacuum": sql("SHOW autovacuum", fetch=True)[0][0],
        "synchronous_commit": sql("SHOW synchronous_commit", fetch=True)[0][0],
        "shared_buffers": sql("SHOW shared_buffers", fetch=True)[0][0],
        "batch_size": settings.SCHEDULER_BATCH_SIZE,
    }


def fmt(value, digits=0):
    if value is None or value != value:
        return "n/a"
    return f"{value:,.{digits}f}"


PEER_WORK = {
    "http": "Every consumer does the same work per occurrence: it takes it (the receipt), sends its job's HTTP "
            "request to the same local sink (GET, POST one time in four) and keeps the answer (cronsvc: the run's "
            "attempt and outcome in PostgreSQL; BullMQ: the status as the job's result; redbeat: nothing more).",
    "record": "The peers' consumers only record the receipt; cronsvc's worker also delivers each run's HTTP "
              "request and records its attempt (--peer-work record).",
}


def render_peers(peers, throughput, peer_work):
    """One table per size: cronsvc (1 and 2 schedulers, vacuumed) and each peer, same run."""
    out = ["Side by side with the peers, in the same invocation: N schedules all due at the same instant T. "
           "dispatched/s = N / (T until nothing due at T is left waiting in the scheduler's store: cronsvc's jobs "
           "table, redbeat's schedule sorted set, BullMQ's delayed set); received/s = N / (T until the consumer "
           "took the last one); lag = receipt - T. Duplicates and lost from the consumer's records (cronsvc: from "
           "the database). " + PEER_WORK[peer_work] + " BullMQ makes an occurrence's job when the previous one is "
           "processed (here: at the upsert), so its dispatch only moves job ids from the delayed set to the wait "
           "list; cronsvc's writes each run to the database and publishes it: the whole path, scheduler to "
           "consumer, is received/s and the lag.", ""]
    for peer, config in PEER_CONFIG.items():
        out.append(f"- {peer}: {config}")
    out.append("")
    for n, runs in peers.items():
        ours = throughput.get((n, 1, True))
        if not ours:
            continue
        ours_run = sorted(ours, key=lambda r: r.rate)[len(ours) // 2]
        out.append(f"{n:,} jobs ({ours_run.due:,} due at once)")
        out.append("")
        out.append("| system | dispatched/s | received/s | lag p50 | lag p99 | duplicates | lost (peers: not received in the bound) | load avg "
                   "| cronsvc (1 scheduler) ÷ this, dispatched/s | received/s |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for procs in (1, 2):
            mine = throughput.get((n, procs, True))
            if not mine:
                continue
            r = sorted(mine, key=lambda r: r.rate)[len(mine) // 2]
            out.append(f"| cronsvc, {procs} scheduler{'s' if procs > 1 else ''} | **{fmt(r.rate)}** | "
                       f"{fmt(r.received_rate)} | {r.receipt_p50:.2f} s | {r.receipt_p99:.2f} s | {r.doubled} | "
                       f"{r.lost} | {r.load:.1f} | | |")
        for peer in runs:
            ratio = ours_run.rate / peer.rate if peer.rate else float("nan")
            received_ratio = ours_run.received_rate / peer.received_rate if peer.received_rate else float("nan")
            bounded = f" ({peer.dispatched:,} of {peer.n:,} within the bound)" if peer.dispatched is not None else ""
            out.append(f"| {peer.peer} | **{fmt(peer.rate)}**{bounded} | {fmt(peer.received_rate)} | {peer.p50:.2f} s | "
                       f"{peer.p99:.2f} s | {peer.duplicates} | {peer.lost} | {peer.load:.1f} | "
                       f"**{fmt(ratio, 2)}×** | {fmt(received_ratio, 2)}× |")
        out.append("")
    return out


def render(meta, args, datasets, throughput, lags, beats, peers=None):
    out = []
    out.append(f"cronsvc scheduler benchmark — {meta['date']}{' (--quick)' if args.quick else ''}, commit "
               f"{meta['commit']}, load average at the start {meta['load_at_start']} (1 / 5 / 15 min)")
    out.append(f"machine: {meta['nproc']} CPUs ({meta['cpu']}), {meta['memory']} RAM; Python {meta['python']}, "
               f"PostgreSQL {meta['postgres']} (autovacuum {meta['autovacuum']}, synchronous_commit "
               f"{meta['synchronous_commit']}, shared_buffers {meta['shared_buffers']}), Redis {meta['redis']}; "
               f"{meta['versions']}")
    out.append(f"scheduler: batch size {args.batch_size or meta['batch_size']}, {args.repeat} run(s) per cell "
               f"(median shown); 'other load' = CPU share used by processes outside the benchmark during the run")
    out.append("")
    out.append("Data sets")
    out.append("")
    out.append("| jobs | organizations | enabled jobs | load time (COPY) |")
    out.append("|---:|---:|---:|---:|")
    for d in datasets:
        out.append(f"| {d.n:,} | {d.orgs:,} | {d.enabled:,} | {d.load_seconds:.1f} s |")
    out.append("")
    out.append("Dispatch throughput: the burst's occurrences (jobs due at the same instant T, organization not "
               "suspended) recorded and published / (last claim of the burst committed - T), while a worker consumes "
               "(the Procfile's line, prefork x3, every plan's queues, a local sink answering 200). Lost = an "
               "occurrence of the burst with no run (nor skip) recorded; doubled = one with two runs or a run "
               "with two attempts that reached the target (retried: more than one attempt, e.g. after a failed "
               "connection); both from the database after every run, once the worker has finished the burst or "
               "the bench's bound on that wait ended ('unfinished at the end'); skipped = recorded as skipped "
               "by the job's own policy (misfire skip past its on-time window, overlap forbid). Claim lag = created_at (the claim) - T; "
               "receipt lag = started_at (the worker's claim) - T. Other occurrences (e.g. the next minute's) are "
               "not counted.")
    out.append("")
    out.append("| jobs | burst | schedulers | vacuum before | dispatches/s (median) | runs | to dispatch | worker "
               "took the last | claim lag p50 / p99 | receipt lag p50 / p99 | lost | doubled | retried "
               "| unfinished at the end | skipped | other occurrences | peak RSS | other load | load avg |")
    out.append("|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (n, procs, vacuumed), runs in throughput.items():
        rates = [r.rate for r in runs]
        med = statistics.median(rates)
        mid = sorted(runs, key=lambda r: r.rate)[len(runs) // 2]
        flags = " (late start)" if not all(r.on_time_start for r in runs) else ""
        out.append(
            f"| {n:,} | {runs[0].due:,} | {procs} | {'yes' if vacuumed else 'no'} | **{fmt(med)}**{flags} | "
            f"{', '.join(fmt(x) for x in rates)} | {mid.seconds:.2f} s | {mid.received_seconds:.2f} s | "
            f"{mid.claim_p50:.2f} / {mid.claim_p99:.2f} s | {mid.receipt_p50:.2f} / {mid.receipt_p99:.2f} s | "
            f"{', '.join(str(r.lost) for r in runs)} | {', '.join(str(r.doubled) for r in runs)} | "
            f"{', '.join(str(r.retried) for r in runs)} | "
            f"{', '.join(str(r.unfinished) for r in runs)} | {', '.join(str(r.skipped) for r in runs)} | "
            f"{', '.join(str(r.other_runs) for r in runs)} | {max(max(r.rss_peak) for r in runs):.0f} MiB | "
            f"{', '.join(f'{r.foreign:.0%}' for r in runs)} | {', '.join(f'{r.load:.1f}' for r in runs)} |")
    out.append("")
    if lags:
        out.append(f"Dispatch lag at a steady {STEADY_RATE:,} due jobs/s "
                   "(lag = arrival in Redis - scheduled_for, jitter 0; arrival bounds the publish time from above)")
        out.append("")
        out.append("| jobs | schedulers | window | dispatched | achieved rate | lag p50 | lag p99 | lag max "
                   "| peak RSS | other load |")
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n, lag in lags:
            out.append(f"| {n:,} | {lag.procs} | {lag.seconds:.0f} s | {lag.dispatched:,} | {fmt(lag.rate)}/s | "
                       f"{lag.p50 * 1000:.0f} ms | **{lag.p99 * 1000:.0f} ms** | {lag.max * 1000:.0f} ms | "
                       f"{max(lag.rss_peak):.0f} MiB | {lag.foreign:.0%} |")
        out.append("")
    rss_rows = [(n, max(max(r.rss_peak) for r in runs)) for (n, procs, vacuumed), runs in throughput.items()
                if procs == 1 and vacuumed]
    if rss_rows:
        out.append("Scheduler peak RSS (VmHWM) vs. N, 1 scheduler after draining the burst: "
                   + ", ".join(f"{n:,} jobs: {rss:.0f} MiB" for n, rss in rss_rows))
        out.append("")
    if beats:
        out.append("django-celery-beat DatabaseScheduler baseline: one PeriodicTask per job (same schedules, "
                   "same due set, same queues and broker), `celery beat` bounded in time")
        out.append("")
        out.append("| jobs | periodic tasks | due | start-up (spawn to 1st message) | messages published | over "
                   "| messages/s | peak RSS | other load | cronsvc, 1 scheduler | cronsvc ÷ beat |")
        out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n, beat in beats:
            ours = throughput.get((n, 1, True))
            ours_rate = statistics.median([r.rate for r in ours]) if ours else float("nan")
            ratio = ours_rate / beat.rate if beat.rate and beat.rate == beat.rate else float("nan")
            out.append(f"| {n:,} | {beat.tasks:,} | {beat.due:,} | {fmt(beat.startup, 1)} s | {beat.published:,}"
                       f"{'' if beat.finished else ' (bounded)'} | {beat.window:.0f} s | {fmt(beat.rate, 1)} | "
                       f"{beat.rss_peak:.0f} MiB | {beat.foreign:.0%} | {fmt(ours_rate)}/s | **{fmt(ratio, 0)}×** |")
        out.append("")
    if peers:
        out.extend(render_peers(peers, throughput, args.peer_work))
    return "\n".join(out)


README_START = "<!-- bench_scheduler figures:start -->"
README_END = "<!-- bench_scheduler figures:end -->"


def write_readme(text, command):
    path = ROOT / "bench" / "README.md"
    block = f"{README_START}\nLatest full run, produced by\n\n```sh\n{command}\n```\n\n{text}\n{README_END}"
    if path.exists():
        current = path.read_text()
        if README_START in current and README_END in current:
            head, rest = current.split(README_START, 1)
            _, tail = rest.split(README_END, 1)
            path.write_text(head + block + tail)
            return
        path.write_text(current.rstrip() + "\n\n## Figures\n\n" + block + "\n")
        return
    path.write_text("# Benchmarks\n\n## Figures\n\n" + block + "\n")


# --- main --------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,1000000", help="numbers of jobs, comma-separated")
    parser.add_argument("--quick", action="store_true", help="10k jobs, one run per cell, short lag and beat runs")
    parser.add_argument("--procs", default="1,2,4", help="scheduler process counts")
    parser.add_argument("--repeat", type=int, default=3, help="runs per throughput cell (median)")
    parser.add_argument("--max-due", type=int, default=200_000, help="cap on jobs due at once")
    parser.add_argument("--batch-size", type=int, default=None, help="SCHEDULER_BATCH_SIZE for the schedulers")
    parser.add_argument("--lag-seconds", type=float, default=45.0, help="steady-load window (<= 55)")
    parser.add_argument("--lag-procs", default="1", help="scheduler counts for the lag measurement")
    parser.add_argument("--beat-sizes", default="10000,100000", help="sizes that also run the beat baseline")
    parser.add_argument("--beat-seconds", type=float, default=90.0, help="bound on each beat run")
    parser.add_argument("--skip-beat", action="store_true")
    parser.add_argument("--skip-lag", action="store_true", help="skip the steady-rate lag phase")
    parser.add_argument("--vacuum", choices=["both", "yes", "no"], default="both",
                        help="vacuum the jobs table before each burst: both (alternating), yes or no")
    parser.add_argument("--peer-sizes", default="10000,100000",
                        help="sizes that also run BullMQ and celery-redbeat on the same burst ('' for none)")
    parser.add_argument("--peers", default="bullmq,redbeat", help="which peers")
    parser.add_argument("--peer-work", choices=("http", "record"), default="http",
                        help="what the peers' consumers do with each occurrence: send its job's HTTP request to "
                             "the same local sink as cronsvc's runs and keep the answer's status (http: the same "
                             "work as cronsvc's worker), or only record the receipt (record)")
    parser.add_argument("--peer-timeout", type=float, default=None,
                        help="longest wait for a peer's consumer after T (s; default max(180, N / 80))")
    parser.add_argument("--drain-timeout", type=float, default=None,
                        help="longest wait for cronsvc's worker to finish the burst (s; default max(120, N / 200))")
    parser.add_argument("--quiet", type=float, default=0.25,
                        help="before each run, wait until other processes use less than this share of the CPUs (0: don't)")
    parser.add_argument("--quiet-timeout", type=float, default=300.0, help="longest wait for a quiet machine (s)")
    parser.add_argument("--retries", type=int, default=3,
                        help="runs repeated when other processes used more than --quiet of the CPUs meanwhile")
    parser.add_argument("--readme", action=argparse.BooleanOptionalAction, default=None,
                        help="write the figures into bench/README.md (default: yes unless --quick)")
    args = parser.parse_args()
    if args.quick:
        args.sizes = "10000"
        args.repeat = 1
        args.lag_seconds = min(args.lag_seconds, 10.0)
        args.beat_seconds = min(args.beat_seconds, 40.0)
        args.beat_sizes = "10000"
    sizes = [int(s) for s in args.sizes.split(",") if s]
    procs_list = [int(p) for p in args.procs.split(",") if p]
    lag_procs = [int(p) for p in args.lag_procs.split(",") if p]
    beat_sizes = set() if args.skip_beat else {int(s) for s in args.beat_sizes.split(",") if s}
    peer_sizes = {int(s) for s in args.peer_sizes.split(",") if s}
    peer_names = [p for p in args.peers.split(",") if p]
    vacuum_modes = {"both": (True, False), "yes": (True,), "no": (False,)}[args.vacuum]
    args.lag_seconds = min(args.lag_seconds, 55.0)

    _, db_name, redis_url = prepare("postgres://postgres@127.0.0.1:5432/cronsvc_bench", "redis://127.0.0.1:6379/5",
                                    OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8")
    meta = machine()
    broker = Broker(redis_url)
    workdir = Path(tempfile.mkdtemp(prefix="bench-scheduler-"))
    extra_env = {"SCHEDULER_BATCH_SIZE": args.batch_size} if args.batch_size else {}
    target, target_url = start_target(workdir)
    ctx = Context(broker=broker, queues=broker.queues(), workdir=workdir, extra_env=extra_env,
                  cpu=CpuMeter(db_name), quiet=args.quiet, quiet_timeout=args.quiet_timeout,
                  target_url=target_url, peer_work=args.peer_work)
    log(f"logs of the child processes: {workdir}")

    def measured(label, run):
        """Run; repeat (at most --retries times) when other processes loaded the machine."""
        for attempt in range(args.retries + 1):
            result = run()
            if not args.quiet or result.foreign < args.quiet or attempt == args.retries:
                return result
            log(f"  {label}: other processes used {result.foreign:.0%} of the CPUs meanwhile; measuring again")
        return result

    datasets, throughput, lags, beats, peers = [], {}, [], [], {}
    started = time.monotonic()
    for n in sizes:
        log(f"loading {n:,} jobs")
        dataset = load_jobs(n, target_url)
        datasets.append(dataset)
        log(f"  {dataset.enabled:,} enabled jobs in {dataset.orgs:,} organizations, {dataset.load_seconds:.1f} s")
        due = min(dataset.enabled, args.max_due)
        for procs in procs_list:
            for rep in range(args.repeat):
                for vacuum in vacuum_modes:  # alternating: both see the same machine
                    run = measured(f"n={n:,} procs={procs}", lambda: run_throughput(
                        ctx, due, procs, f"n{n}-p{procs}-r{rep}-v{int(vacuum)}", timeout=max(120.0, due / 500),
                        vacuum=vacuum, drain_timeout=args.drain_timeout))
                    log(f"  throughput n={n:,} burst={run.due:,} procs={procs} vacuum={'yes' if vacuum else 'no'}: "
                        f"{run.dispatched:,} in {run.seconds:.2f} s = {run.rate:,.0f}/s (worker took the last at "
                        f"{run.received_seconds:.1f} s), lost {run.lost}, unfinished {run.unfinished}, skipped {run.skipped}, "
                        f"doubled {run.doubled}, retried {run.retried}, other occurrences "
                        f"{run.other_runs}, RSS {', '.join(f'{r:.0f}' for r in run.rss_peak)} MiB, other load "
                        f"{run.foreign:.0%}, load avg {run.load:.1f}"
                        f"{'' if run.on_time_start else ' (schedulers started late)'}")
                    throughput.setdefault((n, procs, vacuum), []).append(run)
        if n in peer_sizes:
            burst = expected_burst(due)
            for peer in peer_names:
                runner = {"bullmq": run_bullmq, "redbeat": run_redbeat}[peer]
                result = runner(ctx, burst, timeout=args.peer_timeout or max(180.0, burst / 80))
                log(f"  peer {peer} n={burst:,}: dispatched in {result.seconds:.2f} s = {result.rate:,.0f}/s, "
                    f"received {result.received:,} by {result.received_seconds:.2f} s = {result.received_rate:,.0f}/s, "
                    f"lag p50 {result.p50:.2f} s p99 {result.p99:.2f} s, duplicates {result.duplicates}, lost "
                    f"{result.lost}, setup {result.setup_seconds:.1f} s, load avg {result.load:.1f}")
                peers.setdefault(n, []).append(result)
        for procs in ([] if args.skip_lag else lag_procs):
            lag = measured(f"lag n={n:,}", lambda: run_lag(
                ctx, dataset.enabled, procs, f"n{n}-lag-p{procs}", args.lag_seconds, touched=due))
            log(f"  lag n={n:,} procs={procs}: {lag.dispatched:,} runs at {lag.rate:,.0f}/s, p50 {lag.p50 * 1000:.0f} ms, "
                f"p99 {lag.p99 * 1000:.0f} ms, max {lag.max * 1000:.0f} ms, other load {lag.foreign:.0%}")
            lags.append((n, lag))
        if n in beat_sizes:
            tasks, beat_due = load_beat_tasks(due)
            beat = measured(f"beat n={n:,}", lambda: run_beat(ctx, tasks, beat_due, f"n{n}", args.beat_seconds))
            log(f"  beat n={n:,}: start-up {beat.startup:.1f} s, {beat.published:,} messages in {beat.window:.0f} s "
                f"= {fmt(beat.rate, 1)}/s, RSS {beat.rss_peak:.0f} MiB, other load {beat.foreign:.0%}")
            beats.append((n, beat))
            sql("TRUNCATE django_celery_beat_periodictask CASCADE")
    broker.flush()
    os.killpg(target.pid, signal.SIGTERM)
    text = render(meta, args, datasets, throughput, lags, beats, peers)
    text += f"\ntotal benchmark time: {(time.monotonic() - started) / 60:.1f} min\n"
    print()
    print(text)
    write = (not args.quick) if args.readme is None else args.readme
    if write:
        command = ("DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_bench REDIS_URL=redis://127.0.0.1:6379/5 "
                   "SECRET_KEY=bench .venv/bin/python bench/bench_scheduler.py " + " ".join(sys.argv[1:]))
        write_readme(text, command.strip())
        log("figures written to bench/README.md")


if __name__ == "__main__":
    main()
