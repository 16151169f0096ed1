"""Delivery benchmark (issue 5): deliveries per second end to end, on real PostgreSQL,
Redis, Celery worker processes and a local HTTP target.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_bench_delivery \\
    REDIS_URL=redis://127.0.0.1:6379/6 SECRET_KEY=bench OUTBOUND_ALLOWED_NETWORKS=127.0.0.0/8 \\
    .venv/bin/python bench/bench_delivery.py [--quick]

One delivery = an execution inserted as ``queued`` and published with
``apps.executions.scheduling.publishing.publish`` -> a real ``celery -A config worker`` process claims,
admits, sends it -> the local target receives the request -> the worker records the attempt,
the execution's new state and the job's health. The clock starts when publishing starts and
a delivery counts once its ``succeeded`` row is committed (the benchmark counts those rows
over time).

Configurations: a fast target (answers 200 at once) with 1 and 2 worker processes; a target
that takes 1 s to answer with 1 worker process (a worker process = one ``celery worker``
command with the Procfile's pool, prefork: its pool children included); the same two
targets with the threads pool the Procfile had before, for comparison; and, as the ceiling
for Python, a bare ``requests.Session`` loop against the same fast target (sequential, and
with as many threads as a worker's in-flight pool).

The target is an asyncio HTTP/1.1 keep-alive server in its own process (this file run with
``--serve-target``): no dependency, little CPU per request (its figure: README.md's "What
is measured"), and the 1 s answer is a timer, so it holds thousands of connections.

The database named in DATABASE_URL is created and migrated when missing and its executions,
attempts and jobs are emptied: its name must contain "bench" and must not be the scheduler
benchmark's ``cronsvc_bench``. The Redis DB index is flushed: it must not be 0 (the tests').
Prints figures only; it never passes or fails on a timing.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchenv import log, prepare  # noqa: E402 - bench/ is on sys.path: run as a script

QUEUE = "runs.enterprise"   # the bench's own Redis DB index, so the real queue name is safe
ORGS = 10                   # enterprise organizations (concurrency cap 500 each)
JOBS = 2000                 # executions go round-robin over the jobs: a chunk holds distinct jobs
CLK_TCK = os.sysconf("SC_CLK_TCK")
# A run starts once the machine is less busy than this, or after max_wait seconds.
QUIET = {"share": 0.15, "max_wait": 600.0}


# --- the target (a process of its own; no Django) ---------------------------------------

def serve_target():
    """HTTP/1.1 keep-alive server: ``/slow...`` answers after 1 s, ``/__stats`` returns the
    request counts, anything else answers 200 at once."""
    import asyncio
    import collections

    counts = collections.Counter()
    fast = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{"ok":true}'
    slow = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 7\r\n\r\nslow ok"

    class Http(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport = transport
            self.buf = b""

        def data_received(self, data):
            buf = self.buf + data if self.buf else data
            while True:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    break
                head = buf[:end]
                length = 0
                at = head.lower().find(b"\r\ncontent-length:")
                if at >= 0:
                    stop = head.find(b"\r\n", at + 2)
                    length = int(head[at + 17:stop if stop >= 0 else end])
                total = end + 4 + length
                if len(buf) < total:
                    break
                first_space = head.find(b" ")
                path = head[first_space + 1:head.find(b" ", first_space + 1)]
                buf = buf[total:]
                self.handle(path)
            self.buf = buf

        def handle(self, path):
            if path.startswith(b"/slow"):
                counts["slow"] += 1
                loop.call_later(1.0, self.write, slow)
            elif path.startswith(b"/__stats"):
                body = json.dumps(counts).encode()
                self.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                           % (len(body), body))
            else:
                counts["fast"] += 1
                self.transport.write(fast)

        def write(self, data):
            if not self.transport.is_closing():
                self.transport.write(data)

    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(loop.create_server(Http, "127.0.0.1", 0, backlog=4096))
    print(server.sockets[0].getsockname()[1], flush=True)
    loop.add_signal_handler(signal.SIGTERM, loop.stop)
    loop.run_forever()


# --- the bare baseline (a process of its own) -------------------------------------------

def bare_loop(url, threads, total):
    """``total`` GETs on one requests.Session from ``threads`` threads; prints JSON."""
    import requests

    session = requests.Session()
    adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=max(threads, 10))
    session.mount("http://", adapter)

    def work(n):
        for _ in range(n):
            response = session.get(url, timeout=10)
            response.content  # noqa: B018 - read the body, as a delivery does

    work(200)  # warm: connections open
    cpu, wall = time.process_time(), time.perf_counter()
    if threads == 1:
        work(total)
    else:
        share = [total // threads + (1 if i < total % threads else 0) for i in range(threads)]
        pool = [threading.Thread(target=work, args=(n,)) for n in share]
        for t in pool:
            t.start()
        for t in pool:
            t.join()
    print(json.dumps({"seconds": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                      "requests": total}), flush=True)


def aiohttp_loop(url, inflight, total, on_uvloop=False):
    """``total`` GETs from ``inflight`` coroutines sharing one aiohttp ClientSession, on one
    event loop (one core); prints JSON. The ceiling a Python asyncio client reaches; with
    ``on_uvloop``, on uvloop's event loop (the one the workers' delivery loop runs on)."""
    import asyncio

    import aiohttp

    async def main():
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            async def work(n):
                for _ in range(n):
                    async with session.get(url) as response:
                        await response.read()  # the body, as a delivery reads it

            await asyncio.gather(*(work(2) for _ in range(min(inflight, 100))))  # warm: connections open
            share = [total // inflight + (1 if i < total % inflight else 0) for i in range(inflight)]
            cpu, wall = time.process_time(), time.perf_counter()
            await asyncio.gather(*(work(n) for n in share if n))
            return {"seconds": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "requests": total}

    if on_uvloop:
        import uvloop

        print(json.dumps(uvloop.run(main())), flush=True)
    else:
        print(json.dumps(asyncio.run(main())), flush=True)


# --- the realistic mix (issue 38) -------------------------------------------------------------

MIX_HOSTS = 200            # distinct host names, each its own loopback address
MIX_SLOW_SECONDS = 1.0


def mix_address(n):
    return f"127.0.{1 + n // 250}.{1 + n % 250}"  # never 127.0.0.1: every name its own address


def mix_name(n):
    return f"h{n:03d}.bench.test"


def make_mix_files(workdir):
    """A local CA, a certificate for *.bench.test signed by it, and a hosts file naming
    MIX_HOSTS loopback aliases: (ca.pem, server.pem, server.key, hosts)."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.timezone.utc)

    def certificate(subject, issuer, key, signer, *, ca, names=()):
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(hours=1))
                   .not_valid_after(now + dt.timedelta(days=2))
                   .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                                            critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cronsvc bench CA")])
    ca = certificate(ca_name, ca_name, ca_key, ca_key, ca=True)
    leaf = certificate(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "*.bench.test")]), ca_name, key, ca_key,
                       ca=False, names=("*.bench.test",))
    files = tuple(workdir / name for name in ("ca.pem", "server.pem", "server.key", "hosts"))
    files[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files[1].write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    files[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    files[3].write_text("".join(f"{mix_address(n)} {mix_name(n)}\n" for n in range(MIX_HOSTS)))
    return files


def mix_path(i):
    """Job ``i``'s endpoint in the mix: 5 % answer after MIX_SLOW_SECONDS, 5 % answer 503,
    the rest 200 at once; bodies of 1–16 KiB."""
    size = 1024 * (1 + (i * 7919) % 16)
    return f"/slow{size}" if i % 20 == 0 else "/fail" if i % 20 == 1 else f"/ok{size}"


def mix_url(i, port, scheme="https"):
    return f"{scheme}://{mix_name(i % MIX_HOSTS)}:{port}{mix_path(i)}"


def serve_mix(cert, key):
    """The mix's endpoints on MIX_HOSTS loopback addresses: TLS on one port, plain HTTP on
    another (printed: "tls plain"). ``/okN`` answers N bytes at once, ``/slowN`` after
    MIX_SLOW_SECONDS, ``/fail`` 503, ``/__stats`` the request counts."""
    import asyncio
    import collections
    import ssl

    import uvloop

    counts = collections.Counter()
    bodies = {}

    def answer(status, body):
        return (b"HTTP/1.1 %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s"
                % (status, len(body), body))

    def route(path):
        if path.startswith(b"/__stats"):
            return answer(b"200 OK", json.dumps(counts).encode()), 0.0
        if path.startswith(b"/fail"):
            counts["fail"] += 1
            return answer(b"503 Service Unavailable", b"failing on purpose"), 0.0
        slow = path.startswith(b"/slow")
        counts["slow" if slow else "ok"] += 1
        size = int(path[5:] if slow else path[3:] or b"11")
        if size not in bodies:
            bodies[size] = answer(b"200 OK", b"x" * size)
        return bodies[size], MIX_SLOW_SECONDS if slow else 0.0

    class Http(asyncio.Protocol):
        def connection_made(self, transport):
            self.transport, self.buf = transport, b""
            counts["connections"] += 1  # TLS handshakes on the TLS port: a pool that keeps them opens few

        def data_received(self, data):
            buf = self.buf + data
            while (end := buf.find(b"\r\n\r\n")) >= 0:
                head, length = buf[:end], 0
                at = head.lower().find(b"\r\ncontent-length:")
                if at >= 0:
                    stop = head.find(b"\r\n", at + 2)
                    length = int(head[at + 17:stop if stop >= 0 else end])
                if len(buf) < end + 4 + length:
                    break
                first = head.find(b" ")
                reply, delay = route(head[first + 1:head.find(b" ", first + 1)])
                buf = buf[end + 4 + length:]
                if delay:
                    loop.call_later(delay, self.write, reply)
                else:
                    self.transport.write(reply)
            self.buf = buf

        def write(self, data):
            if not self.transport.is_closing():
                self.transport.write(data)

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    loop = uvloop.new_event_loop()
    hosts = [mix_address(n) for n in range(MIX_HOSTS)]
    ports = []
    for tls in (context, None):  # a free port on the first address, then the same on the others
        first = loop.run_until_complete(loop.create_server(Http, hosts[0], 0, ssl=tls, backlog=4096))
        ports.append(first.sockets[0].getsockname()[1])
        loop.run_until_complete(loop.create_server(Http, hosts[1:], ports[-1], ssl=tls, backlog=4096))
    print(*ports, flush=True)
    loop.add_signal_handler(signal.SIGTERM, loop.stop)
    loop.run_forever()


def bare_mix(urls_file, inflight, ca, hosts):
    """The bare aiohttp loop on the mix: the same URLs, CA and names (through the same
    hosts-file resolver), ``inflight`` coroutines on one uvloop loop (the workers' loop),
    each taking the next URL in order as it finishes one, as a worker sends its runs in
    the order they come; prints JSON. Failing answers are read like the others. (Each
    coroutine once took every ``inflight``-th URL: with ``inflight`` a multiple of 20,
    the coroutines holding the slow URLs waited 1 s for each of theirs in turn, and the
    loop could not finish in less than a second per ``inflight`` URLs, whatever its CPU.)"""
    import asyncio
    import ssl

    import aiohttp
    import uvloop

    from cronsvc.delivery.aio import StaticResolver, hosts_file

    urls = Path(urls_file).read_text().split()

    async def main():
        context = ssl.create_default_context(cafile=ca)
        connector = aiohttp.TCPConnector(limit=0, ssl=context, resolver=StaticResolver(hosts_file(hosts)))
        async with aiohttp.ClientSession(connector=connector) as session:
            async def work(share):
                for url in share:  # an iterator shared by the coroutines: the next URL in order
                    async with session.get(url) as response:
                        await response.read()

            await asyncio.gather(*(work([mix_url(n, *_port_of(urls))]) for n in range(MIX_HOSTS)))  # warm
            cpu, wall = time.process_time(), time.perf_counter()
            queue = iter(urls)
            await asyncio.gather(*(work(queue) for _ in range(inflight)))
            return {"seconds": time.perf_counter() - wall, "cpu": time.process_time() - cpu, "requests": len(urls)}

    print(json.dumps(uvloop.run(main())), flush=True)


def _port_of(urls):
    from urllib.parse import urlsplit

    parts = urlsplit(urls[0])
    return parts.port, parts.scheme


# --- environment ---------------------------------------------------------------------------

def sql(statement, params=None):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall() if cursor.description else None


# --- data ----------------------------------------------------------------------------------

def load_jobs():
    """ORGS enterprise organizations and JOBS jobs, interleaved by organization."""
    from apps.jobs.models import Job
    from apps.plans.models import Plan
    from apps.projects.models import Project
    from apps.projects.provisioning import provision_tenant

    sql("TRUNCATE executions_attempt, executions_execution, jobs_job CASCADE")
    projects = []
    for n in range(ORGS):
        project = Project.objects.filter(organization__slug=f"bench-delivery-{n}").select_related("organization").first()
        if project is None:
            project = provision_tenant(org_name=f"Bench delivery {n}", email=f"bench{n}@delivery.test",
                                       plan_code="enterprise").project
        projects.append(project)
    Plan.objects.filter(code="enterprise").update(queue=QUEUE)
    jobs = [
        Job(project=projects[i % ORGS], organization=projects[i % ORGS].organization, name=f"bench {i}",
            cron_expression="*/5 * * * *", url="http://127.0.0.1:9/", method="GET", next_run_at=None,
            timeout_seconds=30, max_attempts=1)  # one attempt each: the mix's 503s end their run
        for i in range(JOBS)
    ]
    Job.objects.bulk_create(jobs, batch_size=1000)
    return [(job.id, job.organization_id) for job in jobs]


def insert_executions(jobs, n):
    """n queued executions, round-robin over the jobs; returns their ids in that order."""
    from datetime import datetime, timedelta, timezone

    from apps.executions.models import Execution

    sql("TRUNCATE executions_attempt, executions_execution CASCADE")
    base = datetime.now(timezone.utc) - timedelta(days=1)  # due: a worker refuses a run not due yet
    rows = [
        Execution(job_id=jobs[i % len(jobs)][0], organization_id=jobs[i % len(jobs)][1],
                  scheduled_for=base + timedelta(seconds=i // len(jobs)), queue=QUEUE)
        for i in range(n)
    ]
    Execution.objects.bulk_create(rows, batch_size=2000)
    # Autovacuum may be off (it is on the reference machine): every run starts from a
    # vacuumed jobs table, analysed statistics and a fresh checkpoint (the first write of
    # a page after a checkpoint logs the whole page), as the scheduler benchmark does.
    sql("VACUUM ANALYZE jobs_job")
    sql("ANALYZE executions_execution")
    sql("CHECKPOINT")
    return [row.id for row in rows]


def set_job_urls(jobs, url_of):
    """Job ``i`` (in load_jobs' order) sends to ``url_of(i)``: one statement."""
    sql("UPDATE jobs_job SET url = new.url FROM unnest(%s::uuid[], %s::text[]) AS new(id, url) "
        "WHERE jobs_job.id = new.id", [[job_id for job_id, _ in jobs], [url_of(i) for i in range(len(jobs))]])


def status_counts():
    return dict(sql("SELECT status, count(*) FROM executions_execution GROUP BY status"))


# --- processes -------------------------------------------------------------------------------

class Child:
    def __init__(self, args, env, log_path):
        self.log_path = log_path
        self.log = open(log_path, "ab")
        self.popen = subprocess.Popen(args, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                      start_new_session=True)

    def output(self):
        return Path(self.log_path).read_text(errors="replace")

    def stop(self, timeout=30):
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait(5)
        self.log.close()
        return self.popen.returncode


def child_env(**extra):
    env = dict(os.environ)
    env.update(PYTHONUNBUFFERED="1", PYTHONPATH=str(ROOT))
    env.update({k: str(v) for k, v in extra.items()})
    return env


def start_target(workdir):
    popen = subprocess.Popen([sys.executable, __file__, "--serve-target"], stdout=subprocess.PIPE,
                             stderr=open(workdir / "target.log", "ab"), start_new_session=True)
    port = int(popen.stdout.readline())
    return popen, f"http://127.0.0.1:{port}"


def start_mix_target(workdir, cert, key):
    popen = subprocess.Popen([sys.executable, __file__, "--serve-mix", str(cert), str(key)], stdout=subprocess.PIPE,
                             stderr=open(workdir / "mix-target.log", "ab"), start_new_session=True)
    ready = popen.stdout.readline().split()
    if len(ready) != 2:
        sys.exit(f"the mix target did not start: see {workdir / 'mix-target.log'}")
    return popen, int(ready[0]), int(ready[1])


SLOW200 = f"1 s target behind {MIX_HOSTS} host names, 1 worker process"
MIX1 = (f"realistic mix, 1 worker process: TLS (local CA), {MIX_HOSTS} host names, 1–16 KiB answers, "
        "5 % slow (1 s), 5 % failing (503)")


def target_stats(base_url):
    import requests

    return requests.get(base_url + "/__stats", timeout=5).json()


def requests_received(base_url):
    return sum(count for key, count in target_stats(base_url).items() if key != "connections")


@dataclass
class WorkerConfig:
    pool: str
    concurrency: int
    inflight: int
    prefetch: int

    def args(self, name):
        # The Procfile's worker line, plus what the tests' workers leave out too.
        return [sys.executable, "-m", "celery", "-A", "config", "worker", "--queues", QUEUE,
                "--hostname", f"{name}@%h", "--concurrency", str(self.concurrency), "--pool", self.pool,
                "--loglevel", "INFO", "--without-mingle", "--without-gossip"]

    def env(self):
        return child_env(DELIVERY_MAX_INFLIGHT=self.inflight, CELERY_WORKER_PREFETCH_MULTIPLIER=self.prefetch,
                         DELIVERY_HANDOFF_SECONDS=procfile_handoff())

    def label(self):
        return (f"{self.pool}, concurrency {self.concurrency}, in-flight {self.inflight}, prefetch {self.prefetch}, "
                f"handoff {procfile_handoff()} s")


def start_workers(config, count, workdir, tag):
    workers = [Child(config.args(f"{tag}{i}"), config.env(), workdir / f"{tag}-w{i}.log") for i in range(count)]
    deadline = time.time() + 60
    while not all(" ready." in w.output() for w in workers):
        if time.time() > deadline or any(w.popen.poll() is not None for w in workers):
            raise RuntimeError("a worker did not start: " + ", ".join(str(w.log_path) for w in workers))
        time.sleep(0.2)
    return workers


# --- CPU accounting -------------------------------------------------------------------------

def process_cpu(pid):
    """User + system CPU seconds of a process (all its threads), or 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def process_tree(pid):
    """``pid`` and its descendants (a prefork worker's children)."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, ()))
    return tree


def machine_busy():
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    idle = values[3] + values[4]
    return sum(values) - idle, sum(values)


def postgres_pids():
    """Our database's backends and PostgreSQL's own writers (WAL, checkpoints)."""
    rows = sql("SELECT pid FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND "
               "(datname = current_database() OR backend_type IN ('walwriter', 'background writer', 'checkpointer'))")
    return [row[0] for row in rows]


def redis_pid():
    from apps.executions.shared_redis import redis_client

    return redis_client().info("server")["process_id"]


class CpuMeter:
    def __init__(self, groups):
        self.groups = groups  # name -> callable returning pids

    def snapshot(self):
        snap = {name: {pid: process_cpu(pid) for pid in pids()} for name, pids in self.groups.items()}
        snap["_machine"] = machine_busy()
        return snap

    @staticmethod
    def used(before, after):
        """CPU seconds per group between two snapshots (processes absent before start at 0)."""
        used = {}
        for name, pids in after.items():
            if name == "_machine":
                continue
            used[name] = sum(cpu - before.get(name, {}).get(pid, 0.0) for pid, cpu in pids.items())
        (busy0, total0), (busy1, total1) = before["_machine"], after["_machine"]
        used["machine_busy_share"] = (busy1 - busy0) / max(1, total1 - total0)
        # CPU seconds of everything else on the machine (other people's processes, this
        # script's polling): a high figure means a disturbed run.
        seconds = (total1 - total0) / CLK_TCK / (os.cpu_count() or 1)
        ours = sum(v for k, v in used.items() if k != "machine_busy_share")
        used["other"] = max(0.0, (busy1 - busy0) / CLK_TCK - ours) / max(seconds, 1e-9)
        return used


# --- one measured run ------------------------------------------------------------------------

@dataclass
class Run:
    deliveries: int
    seconds: float          # publish start -> last succeeded row counted
    steady_rate: float      # between 10 % and 90 % recorded
    received: int           # requests the target saw
    statuses: dict
    cpu: dict = field(default_factory=dict)
    connections: int | None = None  # connections the target accepted (the mix's target counts them)

    @property
    def rate(self):
        return self.deliveries / self.seconds

    def cpu_ms(self, group):
        return 1000.0 * self.cpu.get(group, 0.0) / self.deliveries


class Stalled(Exception):
    """A run made no progress: the benchmark stops with this message rather than hang."""


STALL_SECONDS = 30.0  # no delivery recorded for this long: the run has stalled


def measured_run(jobs, n, target_url, meter, timeout):
    from apps.executions.scheduling.publishing import publish

    ids = insert_executions(jobs, n)
    forget_breakers()  # each run starts with every host's circuit closed
    log(f"  measuring {n} deliveries")
    received_before, connections_before = requests_received(target_url), target_stats(target_url).get("connections")
    before = meter.snapshot()
    started = time.perf_counter()
    publish({QUEUE: ids})
    samples = [(0.0, 0)]
    deadline = started + timeout
    while True:
        time.sleep(0.2)
        # Recorded: succeeded, or failed for good (the mix's 503s; one attempt per job).
        done = sql("SELECT count(*) FROM executions_execution WHERE status NOT IN ('queued', 'running')")[0][0]
        now = time.perf_counter() - started
        samples.append((now, done))
        if done >= n:
            break
        progressed_at = next(t for t, count in reversed(samples) if count < done or t == 0.0) if done else 0.0
        if now - progressed_at > STALL_SECONDS or time.perf_counter() > deadline:
            raise Stalled(f"stalled: {done} of {n} deliveries recorded, none for {now - progressed_at:.0f} s "
                          f"({now:.0f} s into the run); statuses {status_counts()}")
    after = meter.snapshot()
    seconds = samples[-1][0]
    received = requests_received(target_url) - received_before
    run = Run(n, seconds, steady_rate(samples, n), received, status_counts(), CpuMeter.used(before, after))
    if connections_before is not None:
        run.connections = target_stats(target_url)["connections"] - connections_before
    attempts = sql("SELECT count(*), count(DISTINCT execution_id) FROM executions_attempt")[0]
    if attempts[0] != n or attempts[1] != n or received != n:
        failures = dict(sql("SELECT error_kind || ': ' || left(error_message, 80), count(*) FROM executions_attempt "
                            "WHERE outcome <> 'succeeded' AND error_kind <> 'http_5xx' GROUP BY 1"))
        log(f"  ! {attempts[0]} attempts for {attempts[1]} executions, {received} requests received, "
            f"for {n} executions; failures other than the mix's 503s: {failures}")
    return run


def steady_rate(samples, n):
    def time_at(count):
        for (t0, c0), (t1, c1) in zip(samples, samples[1:]):
            if c1 >= count:
                return t0 + (t1 - t0) * (count - c0) / max(1, c1 - c0)
        return samples[-1][0]

    low, high = time_at(0.1 * n), time_at(0.9 * n)
    return 0.8 * n / (high - low) if high > low else float("nan")


def run_config(name, config, processes, jobs, target_url, url_of, n, repeat, workdir, meter_groups):
    """``target_url``: where the target's request counts are read; ``url_of(i)``: job i's URL."""
    set_job_urls(jobs, url_of)
    flush_redis()
    workers = start_workers(config, processes, workdir, name)
    try:
        groups = dict(meter_groups, worker=lambda: [pid for w in workers for pid in process_tree(w.popen.pid)])
        meter = CpuMeter(groups)
        timeout = 60 + n / 50
        warm = measured_run(jobs, min(n, max(500, 2 * config.inflight * processes)), target_url, meter, timeout)
        log(f"  {name}: warm-up {warm.deliveries} in {warm.seconds:.1f} s")
        runs = []
        for rep in range(repeat):
            wait_for_quiet_machine()
            run = measured_run(jobs, n, target_url, meter, timeout)
            log(f"  {name} run {rep + 1}: {run.deliveries} in {run.seconds:.2f} s = {run.rate:,.0f}/s "
                f"(steady {run.steady_rate:,.0f}/s), worker CPU {run.cpu_ms('worker'):.2f} ms/delivery, "
                f"PG {run.cpu_ms('postgres'):.2f}, Redis {run.cpu_ms('redis'):.2f}, target {run.cpu_ms('target'):.2f} ms; "
                f"machine busy {100 * run.cpu['machine_busy_share']:.0f} % (others {run.cpu['other']:.2f} cores), "
                f"statuses {run.statuses}"
                + (f", {run.connections} connections opened" if run.connections is not None else ""))
            runs.append(run)
    finally:
        codes = [w.stop() for w in workers]
    if any(codes):
        log(f"  worker exit codes {codes}: see {workdir}")
    return runs


def forget_breakers():
    from apps.executions.shared_redis import redis_client

    client = redis_client()
    for key in client.scan_iter("cronsvc:cb:*", count=1000):
        client.delete(key)


def flush_redis():
    from apps.executions.shared_redis import redis_client

    redis_client().flushdb()


def wait_for_quiet_machine(max_wait=None):
    """Benchmarks on 2 cores disturb each other: wait while the scheduler benchmark runs
    (polling every 30 s), then until the machine is mostly idle (other people's test runs),
    for at most ``max_wait`` seconds."""
    waited = False
    max_wait = QUIET["max_wait"] if max_wait is None else max_wait
    deadline = time.time() + max_wait
    while subprocess.run(["pgrep", "-f", "bench_scheduler"], capture_output=True).returncode == 0:
        if time.time() > deadline:
            log(f"  bench_scheduler still runs after {max_wait} s: measuring anyway")
            break
        if not waited:
            log("  waiting for bench_scheduler to finish ...")
            waited = True
        time.sleep(min(30, max(1, deadline - time.time())))
    while True:
        busy0, total0 = machine_busy()
        time.sleep(2)
        busy1, total1 = machine_busy()
        share = (busy1 - busy0) / max(1, total1 - total0)
        if share < QUIET["share"]:
            return
        if time.time() > deadline:
            log(f"  the machine is still {100 * share:.0f} % busy after {max_wait} s: measuring anyway")
            return
        if not waited:
            log(f"  waiting for a quiet machine ({100 * share:.0f} % busy) ...")
            waited = True


def run_bare(url, threads, total, kind="--bare", *extra):
    wait_for_quiet_machine()
    limit = 120 + total / 100
    try:
        out = subprocess.run([sys.executable, __file__, kind, url, str(threads), str(total), *extra],
                             capture_output=True, text=True, check=True, timeout=limit)
    except subprocess.TimeoutExpired:
        raise Stalled(f"stalled: the bare loop ({kind}) did not finish {total} requests in {limit:.0f} s") from None
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- report -----------------------------------------------------------------------------------

def median(values):
    return statistics.median(values) if values else float("nan")


def machine():
    import django
    import celery
    import requests

    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    pg = sql("SHOW server_version")[0][0]
    return (f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, Django {django.get_version()}, "
            f"Celery {celery.__version__}, requests {requests.__version__}, PostgreSQL {pg}")


def goals(results, bare_aio, load_at_start, bare_uvloop=(), bare_mixes=()):
    """The issue-24 figures: fast and 1 s target rates against the goals, and the ratio to
    the bare aiohttp loop measured in the same run, with the machine's load."""
    found = dict(results)
    lines = ["Against the goals (issue 24), this run:", ""]
    aio = median([b["requests"] / b["seconds"] for b in bare_aio]) if bare_aio else float("nan")
    aio_cpu = median([1000 * b["cpu"] / b["requests"] for b in bare_aio]) if bare_aio else float("nan")
    fast = found.get("fast target, 1 worker process")
    if fast:
        rate = median([r.rate for r in fast])
        cpu = median([r.cpu_ms("worker") for r in fast])
        lines.append(f"- fast target, 1 worker process: **{rate:,.0f}/s** (goal 4,000/s), "
                     f"{rate / aio:.2f}× the bare aiohttp loop ({aio:,.0f}/s on one core, {aio_cpu:.3f} ms CPU a "
                     f"request); worker CPU {cpu:.2f} ms a delivery = {cpu / aio_cpu:.1f}× the bare loop's")
        if bare_uvloop:
            uv = median([b["requests"] / b["seconds"] for b in bare_uvloop])
            uv_cpu = median([1000 * b["cpu"] / b["requests"] for b in bare_uvloop])
            lines.append(f"- the same bare loop on uvloop (the workers' event loop): {uv:,.0f}/s, {uv_cpu:.3f} ms CPU "
                         f"a request; the fast target's rate is {rate / uv:.2f}× it")
    fast2 = found.get("fast target, 2 worker processes")
    if fast2:
        rate = median([r.rate for r in fast2])
        lines.append(f"- fast target, 2 worker processes: **{rate:,.0f}/s**, {rate / aio:.2f}× the bare aiohttp loop")
    slow = found.get("1 s target, 1 worker process")
    if slow:
        steady = median([r.steady_rate for r in slow])
        lines.append(f"- 1 s target, 1 worker process: **{steady:,.0f}/s steady** (goal 2,000/s; "
                     f"{median([r.rate for r in slow]):,.0f}/s publish → last recorded), so about "
                     f"{steady:,.0f} requests in flight (rate × 1 s)")
    slow200 = found.get(SLOW200)
    if slow200:
        steady = median([r.steady_rate for r in slow200])
        lines.append(f"- 1 s target behind {MIX_HOSTS} names, 1 worker process: **{steady:,.0f}/s steady** (goal "
                     f"2,000/s); one host alone gets at most DELIVERY_MAX_CONNECTIONS_PER_HOST × pool children "
                     f"requests at once")
    mix = found.get(MIX1)
    if mix and bare_mixes:
        rate, cpu = median([r.rate for r in mix]), median([r.cpu_ms("worker") for r in mix])
        bare = median([b["requests"] / b["seconds"] for b in bare_mixes])
        bare_cpu = median([1000 * b["cpu"] / b["requests"] for b in bare_mixes])
        lines.append(f"- realistic mix, 1 worker process: **{rate:,.0f}/s**, **{rate / bare:.2f}×** the bare aiohttp "
                     f"loop on the same mix (goal ≥ 0.6×; {bare:,.0f}/s on one core, {bare_cpu:.3f} ms CPU a "
                     f"request); worker CPU {cpu:.2f} ms a delivery = {cpu / bare_cpu:.1f}× the bare loop's")
    lines.append(f"- load average at the start {load_at_start[0]:.2f}, at the end {os.getloadavg()[0]:.2f} "
                 f"(1 min; a shared machine: other processes' share is in the table's last column)")
    return "\n".join(lines) + "\n"


def render(meta, args, results, bare_seq, bare_threads, config_fast, config_slow, bare_aio=(), bare_uvloop=()):
    out = [f"Machine: {meta}.", ""]
    out.append(f"Worker pool: `{config_fast.label()}` (slow target: `{config_slow.label()}`). "
               f"{args.chunk} ids per message (`PUBLISH_CHUNK`). "
               f"Median of {args.repeat} runs after a warm-up; {args.deliveries:,} deliveries per fast run, "
               f"{args.slow_deliveries:,} per slow run; {ORGS} enterprise organizations, {JOBS:,} jobs.")
    out.append("")
    out.append("| configuration | deliveries/s, publish → last recorded (min–max) | steady deliveries/s "
               "(10 %→90 % recorded) | worker CPU ms/delivery | PostgreSQL CPU ms | Redis CPU ms | target CPU ms "
               "| machine busy | other load (cores) |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, runs in results:
        rates = [r.rate for r in runs]
        out.append(
            f"| {name} | **{median(rates):,.0f}** ({min(rates):,.0f}–{max(rates):,.0f}) | "
            f"{median([r.steady_rate for r in runs]):,.0f} | "
            f"{median([r.cpu_ms('worker') for r in runs]):.2f} | {median([r.cpu_ms('postgres') for r in runs]):.2f} | "
            f"{median([r.cpu_ms('redis') for r in runs]):.2f} | {median([r.cpu_ms('target') for r in runs]):.2f} | "
            f"{100 * median([r.cpu['machine_busy_share'] for r in runs]):.0f} % | "
            f"{median([r.cpu['other'] for r in runs]):.2f} |")
    for name, bare in (("bare aiohttp loop, 256 in flight, one event loop", bare_aio),
                       ("the same bare aiohttp loop on uvloop", bare_uvloop),
                       ("bare `requests.Session` loop, 1 thread", bare_seq),
                       (f"bare `requests.Session` loop, {args.bare_threads} threads", bare_threads)):
        rates = [b["requests"] / b["seconds"] for b in bare]
        cpu = median([1000 * b["cpu"] / b["requests"] for b in bare])
        out.append(f"| {name} | **{median(rates):,.0f}** ({min(rates):,.0f}–{max(rates):,.0f}) | — | "
                   f"{cpu:.2f} (client) | — | — | — | — | — |")
    out.append("")
    one = dict(results)["fast target, 1 worker process"]
    ours_cpu = median([r.cpu_ms("worker") for r in one])
    ours_all = median([r.cpu_ms("worker") + r.cpu_ms("postgres") + r.cpu_ms("redis") for r in one])
    bare_cpu = median([1000 * b["cpu"] / b["requests"] for b in bare_threads])
    ours_wall = 1000 / median([r.rate for r in one])
    bare_wall = 1000 / median([b["requests"] / b["seconds"] for b in bare_threads])
    out.append("Overhead per delivery, ours minus the bare loop with the same thread count (fast target, "
               "1 worker process):")
    out.append("")
    out.append(f"- CPU: worker process {ours_cpu:.2f} ms − bare client {bare_cpu:.2f} ms = "
               f"**{ours_cpu - bare_cpu:.2f} ms of one core per delivery**; counting the PostgreSQL and Redis "
               f"work the worker causes too: {ours_all:.2f} − {bare_cpu:.2f} = {ours_all - bare_cpu:.2f} ms.")
    if config_fast.pool == "prefork":
        note = (f"the bare loop runs on one core at a time under the GIL, the worker's {config_fast.concurrency} "
                "pool children on both cores: this flatters the worker; read the CPU figure")
    else:
        note = "one process ≈ one core under the GIL"
    seq_cpu = median([1000 * b["cpu"] / b["requests"] for b in bare_seq]) if bare_seq else float("nan")
    out.append(f"- CPU against the one-thread bare loop (no thread contention: the cheapest a Python client "
               f"gets): {ours_cpu:.2f} − {seq_cpu:.2f} = **{ours_cpu - seq_cpu:.2f} ms**; with PostgreSQL and "
               f"Redis: {ours_all:.2f} − {seq_cpu:.2f} = {ours_all - seq_cpu:.2f} ms.")
    out.append(f"- Wall clock ({note}): 1000 / rate = {ours_wall:.2f} ms − {bare_wall:.2f} ms = "
               f"{ours_wall - bare_wall:.2f} ms.")
    return "\n".join(out)


README_START = "<!-- delivery:start -->"
README_END = "<!-- delivery:end -->"
SECTION = "## Delivery: bench_delivery.py"

METHOD = """\
### How to run

```sh
# PostgreSQL and Redis running (make test starts them: scripts/ensure-services.sh)
DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_bench_delivery \\
REDIS_URL=redis://127.0.0.1:6379/6 SECRET_KEY=bench OUTBOUND_ALLOWED_NETWORKS=127.0.0.0/8 \\
.venv/bin/python bench/bench_delivery.py            # full: 5 runs per configuration (~20 min)

... bench/bench_delivery.py --quick                 # one short run per configuration (~2 min)
... bench/bench_delivery.py --only fast2 --repeat 3 # one configuration
... bench/bench_delivery.py --help                  # worker knobs: --concurrency, --inflight, --chunk, ...
```

It creates and migrates the database of `DATABASE_URL` when missing and empties its jobs,
executions and attempts (it refuses a name without `bench`, and `cronsvc_bench`, the
scheduler benchmark's); it flushes the Redis DB index of `REDIS_URL` (it refuses 0, the
tests', and 5, the scheduler benchmark's). Two copies never run at once (a lock file).
Before each measured run it waits while `bench_scheduler.py` runs (polling every 30 s) and
then until the machine is less than 15 % busy (at most `--quiet-wait` seconds). Child
process logs go to a temporary directory printed at the start. A full run writes its table
between the `delivery` markers below (`--no-readme` to skip; `--quick` never writes).

### What is measured

**End to end.** Executions are inserted as `queued` (10 enterprise organizations, 2,000
jobs, round-robin so that a message holds distinct jobs), then published with
`apps.executions.scheduling.publishing.publish` (`PUBLISH_CHUNK` ids per message) while real
`celery -A config worker` processes run (the Procfile's worker line with its defaults, plus
`--without-mingle --without-gossip` as in the tests). The workers claim, admit (overlap lock,
organization concurrency cap, circuit breaker, rate limit), sign and send each request, and
record the attempt, the execution's new state and the job's health. The clock starts when
publishing starts; a delivery counts when its `succeeded` row is committed (the benchmark
counts them every 0.2 s). "Publish → last recorded" is deliveries / time to the last one;
"steady" is the rate between 10 % and 90 % recorded. Each run checks that every execution
has exactly one attempt and the target received exactly one request per execution. Before
each run: the executions and attempts are truncated, the jobs table vacuumed (autovacuum
is off on the reference machine) and a `CHECKPOINT` taken. One warm-up run per
configuration is not counted; the table shows the median of the runs.

**Targets.** The target is an asyncio HTTP/1.1 keep-alive server in a process of its own
(this file with `--serve-target`, no dependency): the fast target answers 200 at once
(~0.05 ms of CPU a request), the slow one after 1 s (a timer, so it holds any number of
connections).

**The realistic mix (issue 38).** `mix1`: the 2,000 jobs send over HTTPS to 200 host
names (`h000.bench.test` …), each its own loopback alias (127.0.1.1 …), answered by a
second target process (`--serve-mix`, uvloop, TLS with a certificate for `*.bench.test`
signed by a CA made at the start with `cryptography`). The workers trust that CA through
`DELIVERY_CA_BUNDLE` and resolve the names through `DELIVERY_HOSTS_FILE` (a hosts file
written at the start; /etc/hosts is not touched); the outbound guard still checks every
address (`OUTBOUND_ALLOWED_NETWORKS=127.0.0.0/8`). Job *i* gets a 1–16 KiB answer at once,
except 5 % that answer after 1 s and 5 % that answer 503 (one attempt per job: a 503 ends
its run as `dead`; a run counts when it is recorded, whatever its outcome). The bare
aiohttp loop on the same mix (`--bare-mix`: the same URLs in the same order, the same CA and
hosts file, `DELIVERY_MAX_INFLIGHT` coroutines on one uvloop loop) runs in the same
invocation; the ratio of the two is the figure. The target counts the connections it
accepted (TLS handshakes). `slow200`: the 1 s target behind the same 200 names over plain
HTTP: one host alone gets at most `DELIVERY_MAX_CONNECTIONS_PER_HOST` × pool children of
a worker's requests at once, so `slow1` (one host) is capped by it.

**Never hangs.** A run with no delivery recorded for 30 s, or past its time limit, stops
the benchmark with a message naming the statuses reached; a bare loop has a time limit too.

**Baseline.** A bare `requests.Session` loop in a process of its own against the same fast
target: one thread, and as many threads as a worker process has delivery threads
(`DELIVERY_MAX_INFLIGHT`), sharing one session whose pool holds that many connections.

**CPU and overhead.** CPU is read from `/proc/<pid>/stat` before and after each run for
the worker processes (with their children), PostgreSQL (the benchmark database's backends,
the WAL writer, background writer and checkpointer), Redis and the target, and divided by
the deliveries. "Other load" is the rest of the machine's CPU over the run, in cores: other
people's processes (this machine is shared), so a high figure marks a disturbed run.
Overhead per delivery = the worker's CPU per delivery (main process and pool children)
minus the bare threaded loop's CPU per request: milliseconds of one core. The same with the
PostgreSQL and Redis work the worker causes, and a wall-clock version (1000 / deliveries
per second of one worker, minus the same for the bare loop) are given as cross-checks; the
bare loop runs Python on one core at a time (the GIL), a prefork worker's children on both
cores, so the wall-clock version flatters a prefork worker.

**Worker pool.** The Procfile's: prefork, `WORKER_CONCURRENCY` (3) children per worker,
prefetch 1, `DELIVERY_MAX_INFLIGHT` requests in flight per child. "1 worker process" is one
`celery worker` command as a Procfile line runs it: its main process with its pool children,
which it starts, supervises and stops (one process in the Procfile's and the process
manager's sense; the CPU columns count the children too). "2 worker processes" are two such
commands (8 children on 2 cores). Each child runs one message (up to `PUBLISH_CHUNK` runs) at
a time and waits for its runs at most `DELIVERY_HANDOFF_SECONDS` (5 s; runs still waiting
then go to the child's late recorder and the child takes its next message), so against the
1 s target a worker has about `WORKER_CONCURRENCY` × `PUBLISH_CHUNK` runs in flight: that, not CPU, sets
the slow figure (the figures by children and hand-off: "Worker pool" in bench/README.md's
"What is measured"). The configurations marked
"comparison" run the pool the Procfile had before (threads, 8 task threads in one process
sharing one GIL).
"""


def write_readme(text, command):
    path = ROOT / "bench" / "README.md"
    block = f"{README_START}\nLatest full run, produced by\n\n```sh\n{command}\n```\n\n{text}\n{README_END}"
    section = f"{SECTION}\n\n{METHOD}\n### Figures\n\n{block}\n"
    if not path.exists():
        path.write_text("# Benchmarks\n\nFigures from the benchmarks in this folder; each section says how "
                        "it was measured and with which command. They never pass or fail on a timing.\n\n"
                        + section)
        return
    current = path.read_text()
    if README_START in current and README_END in current:
        head, rest = current.split(README_START, 1)
        _, tail = rest.split(README_END, 1)
        path.write_text(head + block + tail)
    else:
        path.write_text(current.rstrip() + "\n\n" + section)


# --- main ---------------------------------------------------------------------------------------

def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-target":
        return serve_target()
    if len(sys.argv) > 1 and sys.argv[1] == "--bare":
        return bare_loop(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    if len(sys.argv) > 1 and sys.argv[1] == "--serve-mix":
        return serve_mix(sys.argv[2], sys.argv[3])
    if len(sys.argv) > 1 and sys.argv[1] == "--bare-mix":
        return bare_mix(sys.argv[2], int(sys.argv[3]), sys.argv[5], sys.argv[6])
    if len(sys.argv) > 1 and sys.argv[1] in ("--bare-aiohttp", "--bare-aiohttp-uvloop"):
        return aiohttp_loop(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), on_uvloop=sys.argv[1].endswith("uvloop"))

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer deliveries, one run per configuration")
    parser.add_argument("--repeat", type=int, default=5, help="runs per configuration (median)")
    parser.add_argument("--deliveries", type=int, default=None,
                        help="deliveries per fast-target run (default 30,000; --quick 10,000)")
    parser.add_argument("--slow-deliveries", type=int, default=None,
                        help="deliveries per 1 s-target run (default 20,000; --quick 8,000)")
    parser.add_argument("--pool", default=None, choices=("threads", "prefork", "solo"),
                        help="worker --pool (default: the Procfile's)")
    parser.add_argument("--concurrency", type=int, default=None, help="worker --concurrency (default: the Procfile's)")
    parser.add_argument("--inflight", type=int, default=None, help="DELIVERY_MAX_INFLIGHT (default: the settings')")
    parser.add_argument("--prefetch", type=int, default=None, help="CELERY_WORKER_PREFETCH_MULTIPLIER")
    parser.add_argument("--only", default="fast1,fast2,slow1,slow200,mix1,threads1,threadsslow1,bare",
                        help="configurations to run: fast1, fast2, slow1, slow200 (the 1 s target behind "
                             f"{MIX_HOSTS} host names), mix1 (the realistic mix, with its bare aiohttp loop), "
                             "threads1 and threadsslow1 (the earlier threads pool, for comparison), bare")
    parser.add_argument("--chunk", type=int, default=None,
                        help="ids per published message (default: publishing.PUBLISH_CHUNK)")
    parser.add_argument("--quiet-wait", type=float, default=None,
                        help=f"longest wait for a quiet machine before each run, in seconds (default "
                             f"{QUIET['max_wait']:.0f}; --quick 10)")
    parser.add_argument("--readme", action=argparse.BooleanOptionalAction, default=None,
                        help="write the figures into bench/README.md (default: yes unless --quick)")
    args = parser.parse_args()
    if args.quick:
        args.repeat = 1
    args.deliveries = args.deliveries or (10000 if args.quick else 30000)
    args.slow_deliveries = args.slow_deliveries or (8000 if args.quick else 20000)
    only = set(args.only.split(","))
    QUIET["max_wait"] = args.quiet_wait if args.quiet_wait is not None else 10.0 if args.quick else QUIET["max_wait"]

    lock = open(Path(tempfile.gettempdir()) / "bench_delivery.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit("another bench_delivery.py is running (they would share the database and the queue)")
    prepare("postgres://postgres@127.0.0.1:5432/cronsvc_bench_delivery", "redis://127.0.0.1:6379/6",
            refused_dbs=("cronsvc_bench",), refused_redis=("0", "5"), OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8")
    from django.conf import settings

    from apps.executions.scheduling import publishing

    if args.chunk:
        publishing.PUBLISH_CHUNK = args.chunk
    args.chunk = publishing.PUBLISH_CHUNK
    concurrency = args.concurrency or int(os.environ.get("WORKER_CONCURRENCY", procfile_concurrency()))
    config = WorkerConfig(args.pool or procfile_pool(), concurrency, args.inflight or settings.DELIVERY_MAX_INFLIGHT,
                          args.prefetch or settings.CELERY_WORKER_PREFETCH_MULTIPLIER)
    # --quick: the threaded requests baseline with at most 256 threads (1,000 threads cost a
    # minute of their own on a busy machine and are not the comparison issue 24 asks for).
    args.bare_threads = min(config.inflight, 256) if args.quick else config.inflight
    meta = machine()
    workdir = Path(tempfile.mkdtemp(prefix="bench-delivery-"))
    log(f"logs of the child processes: {workdir}")
    log(f"worker: {config.label()}; {args.chunk} ids per message")
    target, target_url = start_target(workdir)
    ca, cert, key, hosts = make_mix_files(workdir)
    # The workers trust the local CA and resolve the mix's names from the hosts file; the
    # outbound guard still checks every address (OUTBOUND_ALLOWED_NETWORKS: loopback).
    os.environ.update(DELIVERY_CA_BUNDLE=str(ca), DELIVERY_HOSTS_FILE=str(hosts))
    mix_target, tls_port, plain_port = start_mix_target(workdir, cert, key)
    mix_stats = f"http://{mix_address(0)}:{plain_port}"
    started = time.monotonic()
    load_at_start = os.getloadavg()
    try:
        jobs = load_jobs()
        meter_groups = {"postgres": postgres_pids, "redis": lambda: [redis_pid()], "target": lambda: [target.pid],
                        "bench": lambda: [os.getpid()]}
        meter_groups["target"] = lambda: [target.pid, mix_target.pid]
        results = []
        # The pool the Procfile had before (comparison): 8 task threads in one process.
        threads = WorkerConfig("threads", 8, config.inflight, config.prefetch)

        def at(path):
            return lambda i: target_url + path

        for key, name, worker_config, processes, stats, url_of, n in (
            ("fast1", "fast target, 1 worker process", config, 1, target_url, at("/hook"), args.deliveries),
            ("fast2", "fast target, 2 worker processes", config, 2, target_url, at("/hook"), args.deliveries),
            ("slow1", "1 s target, 1 worker process", config, 1, target_url, at("/slow"), args.slow_deliveries),
            ("slow200", SLOW200, config, 1, mix_stats,
             lambda i: f"http://{mix_name(i % MIX_HOSTS)}:{plain_port}/slow11", args.slow_deliveries),
            ("mix1", MIX1, config, 1, mix_stats, lambda i: mix_url(i, tls_port), args.deliveries),
            ("threads1", "fast target, 1 threads worker, concurrency 8 (comparison)", threads, 1, target_url,
             at("/hook"), args.deliveries),
            ("threadsslow1", "1 s target, 1 threads worker, concurrency 8 (comparison)", threads, 1, target_url,
             at("/slow"), args.slow_deliveries),
        ):
            if key in only:
                log(f"{name}: {worker_config.label()}")
                results.append((name, run_config(key, worker_config, processes, jobs, stats, url_of, n,
                                                 args.repeat, workdir, meter_groups)))
        bare_mixes = []
        if "mix1" in only:
            urls = workdir / "mix-urls"
            urls.write_text("\n".join(mix_url(k % JOBS, tls_port) for k in range(args.deliveries)))
            for rep in range(args.repeat):
                bare_mixes.append(run_bare(str(urls), config.inflight, args.deliveries, "--bare-mix", ca, hosts))
                log(f"  bare aiohttp loop on the mix, run {rep + 1}: {config.inflight} in flight, "
                    f"{bare_mixes[-1]['requests'] / bare_mixes[-1]['seconds']:,.0f}/s, "
                    f"{1000 * bare_mixes[-1]['cpu'] / bare_mixes[-1]['requests']:.3f} ms CPU/request")
        bare_seq, bare_threads, bare_aio, bare_uvloop = [], [], [], []
        if "bare" in only:
            for rep in range(args.repeat):
                for runs, kind in ((bare_aio, "--bare-aiohttp"), (bare_uvloop, "--bare-aiohttp-uvloop")):
                    runs.append(run_bare(target_url + "/hook", 256, args.deliveries, kind))
                    log(f"  bare aiohttp run {rep + 1}{' on uvloop' if runs is bare_uvloop else ''}: 256 in flight, "
                        f"{runs[-1]['requests'] / runs[-1]['seconds']:,.0f}/s, "
                        f"{1000 * runs[-1]['cpu'] / runs[-1]['requests']:.3f} ms CPU/request")
                bare_seq.append(run_bare(target_url + "/hook", 1, min(args.deliveries, 10000)))
                bare_threads.append(run_bare(target_url + "/hook", args.bare_threads, args.deliveries))
                log(f"  bare run {rep + 1}: 1 thread {bare_seq[-1]['requests'] / bare_seq[-1]['seconds']:,.0f}/s, "
                    f"{args.bare_threads} threads {bare_threads[-1]['requests'] / bare_threads[-1]['seconds']:,.0f}/s")
    except Stalled as stall:
        log(str(stall))
        sys.exit(f"{stall} (child logs: {workdir})")
    finally:
        for process in (target, mix_target):
            process.send_signal(signal.SIGTERM)
            process.wait(10)
    summary = goals(results, bare_aio, load_at_start, bare_uvloop, bare_mixes)
    if not (results and bare_threads and "fast target, 1 worker process" in dict(results)):
        for name, runs in results:
            print(name, [f"{r.rate:,.0f}/s (steady {r.steady_rate:,.0f}/s)" for r in runs])
        print(summary)
        return
    text = render(meta, args, results, bare_seq, bare_threads, config, config, bare_aio, bare_uvloop) + "\n" + summary
    text += f"\n\nTotal benchmark time: {(time.monotonic() - started) / 60:.1f} min.\n"
    print()
    print(text)
    if (not args.quick) if args.readme is None else args.readme:
        command = ("DATABASE_URL=postgres://postgres@127.0.0.1:5432/cronsvc_bench_delivery "
                   "REDIS_URL=redis://127.0.0.1:6379/6 SECRET_KEY=bench OUTBOUND_ALLOWED_NETWORKS=127.0.0.0/8 "
                   ".venv/bin/python bench/bench_delivery.py " + " ".join(sys.argv[1:]))
        write_readme(text, command.strip())
        log("figures written to bench/README.md")


def procfile_pool():
    """The ``--pool`` of the Procfile's worker lines (Celery's default, prefork, when absent)."""
    words = next(line for line in (ROOT / "Procfile").read_text().splitlines()
                 if line.startswith("worker_pro:")).split()
    return words[words.index("--pool") + 1] if "--pool" in words else "prefork"


def procfile_handoff():
    """DELIVERY_HANDOFF_SECONDS as the Procfile's worker lines set it (the environment's first)."""
    import re

    match = re.search(r"worker_pro:.*DELIVERY_HANDOFF_SECONDS:-([0-9.]+)", (ROOT / "Procfile").read_text())
    return os.environ.get("DELIVERY_HANDOFF_SECONDS") or (match.group(1) if match else "5.0")


def procfile_concurrency():
    """The default of ${WORKER_CONCURRENCY:-N} on the Procfile's worker lines."""
    import re

    match = re.search(r"worker_pro:.*WORKER_CONCURRENCY:-(\d+)", (ROOT / "Procfile").read_text())
    return int(match.group(1)) if match else 50


if __name__ == "__main__":
    main()
