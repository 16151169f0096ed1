"""The soak from start to verdict: services, platform, load, chaos, drain, checks, table."""

import argparse
import os
import platform as host
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from . import chaos, checks
from .platform import ROOT, platform_processes, run_release, wait_healthy
from .services import FaultProxy, PrivatePostgres, PrivateRabbitMQ, PrivateRedis, free_port
from .target import read_log

#: Settings of the soak's platform: the defaults, but for quicker sweeps and a short lease
#: margin (a killed worker's runs come back 5 s after their timeout, not 60 s). Lost
#: messages are found as in production: SWEEPER_REPUBLISH_IDLE_AFTER (10 s) when their
#: queue is empty, SWEEPER_REPUBLISH_AFTER (60 s) behind a backlog.
SOAK_SETTINGS = {
    "SECRET_KEY": "soak-only-not-secret",
    "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8",
    "SWEEPER_INTERVAL": "1",
    "DELIVERY_LEASE_MARGIN": "5",
    "DJANGO_SETTINGS_MODULE": "config.settings",
}


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__)
    parser.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 600)),
                        help="length of the chaos window (SOAK_SECONDS, default 600)")
    parser.add_argument("--seed", type=int, default=int(os.environ.get("SOAK_SEED", 12)))
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("SOAK_JOBS", 2000)),
                        help="jobs to load (SOAK_JOBS, default 2000)")
    parser.add_argument("--interval", default=os.environ.get("SOAK_INTERVAL", "60-180"),
                        help="job intervals in seconds, MIN-MAX (SOAK_INTERVAL, default 60-180: ~17 runs/s "
                             "from 2000 jobs, half of what two workers managed on a 2-core machine under "
                             "chaos (~32 attempts/s), so lag and recovery measure faults, not a backlog)")
    parser.add_argument("--broker", choices=("redis", "rabbitmq"), default=os.environ.get("SOAK_BROKER", "redis"),
                        help="the Celery broker (SOAK_BROKER, default redis); with rabbitmq a private RabbitMQ "
                             "node is the broker, Redis keeps the limits, and the chaos restarts both")
    parser.add_argument("--extra-faults", default=os.environ.get("SOAK_EXTRA_FAULTS", "all"),
                        help="issue 34's faults, comma-separated, all (the default) or none (SOAK_EXTRA_FAULTS): "
                             "clock (a scheduler 30 s ahead under libfaketime), jump (a running scheduler's clock "
                             "jumps 1 h ahead for 20 s), lease (a worker paused past its lease), proxy "
                             "(connections to PostgreSQL and Redis cut, then each blackholed 8 s), burst (300 "
                             "runs due at the same second)")
    parser.add_argument("--worker-concurrency", type=int, default=4)
    parser.add_argument("--drain-timeout", type=float, default=240)
    parser.add_argument("--workdir", help="where logs go (default: a new temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory even when the soak passes")
    parser.add_argument("--summary", help="also write the Markdown summary to this file")
    args = parser.parse_args(argv)
    names = [f for f in args.extra_faults.replace(" ", "").split(",") if f]
    args.extra_faults = (chaos.EXTRA_FAULTS if names == ["all"] else () if names in ([], ["none"])
                         else tuple(names))
    unknown = set(args.extra_faults) - set(chaos.EXTRA_FAULTS)
    if unknown:
        parser.error(f"unknown extra faults: {', '.join(sorted(unknown))} (known: {', '.join(chaos.EXTRA_FAULTS)})")
    if {"clock", "jump"} & set(args.extra_faults) and chaos.faketime_library() is None:
        parser.error("the clock and jump faults need libfaketime (make faketime)")
    low, _, high = args.interval.partition("-")
    args.interval = (int(low), int(high or low))
    return args


class Soak:
    def __init__(self, args):
        self.args = args
        self.workdir = Path(args.workdir or tempfile.mkdtemp(prefix="cronsvc-soak-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.chaos_log = open(self.workdir / "chaos.log", "a")
        self.postgres = PrivatePostgres(self.workdir)
        self.redis = PrivateRedis(self.workdir)
        self.rabbitmq = PrivateRabbitMQ(self.workdir) if args.broker == "rabbitmq" else None
        self.target = None
        self.proxies = {}  # {"postgres"/"redis": FaultProxy} with the proxy fault
        self.processes = []
        self.load_before = " / ".join(f"{x:.2f}" for x in os.getloadavg())

    def log(self, message):
        line = f"[soak {time.strftime('%H:%M:%S')}] {message}"
        print(line, flush=True)
        self.chaos_log.write(line + "\n")
        self.chaos_log.flush()

    # -- setting up -------------------------------------------------------------------
    def start_services(self):
        self.log(f"work directory: {self.workdir}")
        self.postgres.init()
        self.redis.start()
        self.log(f"private PostgreSQL on :{self.postgres.port}, Redis on :{self.redis.port}")
        if self.rabbitmq:
            self.rabbitmq.start()
            self.log(f"private RabbitMQ node {self.rabbitmq.node} on :{self.rabbitmq.port} (the broker)")
        if "proxy" in self.args.extra_faults:
            for _, service in chaos.PROXIED:
                self.proxies[service] = proxy = FaultProxy(self.workdir, service, getattr(self, service).port)
                proxy.start()
            self.log("the platform's processes reach them through proxies on "
                     + ", ".join(f":{p.port} ({s})" for s, p in self.proxies.items()))
        self.target_log = self.workdir / "target.jsonl"
        self.target = subprocess.Popen(
            [sys.executable, "-m", "soak.target", "--log", str(self.target_log), "--seed", str(self.args.seed)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=open(self.workdir / "target.err", "ab"), text=True,
            start_new_session=True)
        self.target_url = f"http://127.0.0.1:{int(self.target.stdout.readline())}"

    def platform_env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("CELERY_", "DATABASE_", "REDIS_"))}
        env.update(SOAK_SETTINGS, DATABASE_URL=self.postgres.url, REDIS_URL=self.redis.url)
        if self.rabbitmq:
            env["CELERY_BROKER_URL"] = self.rabbitmq.url
        return env

    def start_platform(self):
        env = self.platform_env()
        run_release(env, self.workdir)
        os.environ.update(env)  # the soak itself talks to PostgreSQL and Redis directly
        import django

        django.setup()
        self.web_port = free_port()
        if self.proxies:
            env["DATABASE_URL"] = self.proxies["postgres"].url(self.postgres.url)
            env["REDIS_URL"] = self.proxies["redis"].url(self.redis.url)
        self.processes = platform_processes(env, self.workdir, web_port=self.web_port,
                                            worker_concurrency=self.args.worker_concurrency)
        for process in self.processes:
            process.start()
        if not wait_healthy(self.web_port, 120):
            raise RuntimeError("the web process did not answer /healthz")
        for process in self.processes:
            if process.kind == "worker":
                self._wait_log(process, "ready", 180)
        self.log("platform up: " + ", ".join(p.name for p in self.processes))

    def _wait_log(self, process, text, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in process.log_path.read_text(errors="replace"):
                return
            time.sleep(0.3)
        raise RuntimeError(f"{process.name} did not log {text!r} within {timeout}s")

    # -- the soak ---------------------------------------------------------------------
    def run(self):
        from django.utils import timezone

        from . import load

        a = self.args
        start = timezone.now() + timedelta(seconds=3 + a.jobs / 1000)  # loading takes ~1 s per 1,000
        burst = None
        if "burst" in a.extra_faults:  # all due at one whole second of the soak's clock
            burst = (start + timedelta(seconds=chaos.burst_at(a.seconds)), chaos.BURST_JOBS, chaos.BURST_INTERVAL)
        self.org_ids = load.load(seed=a.seed, jobs=a.jobs, interval=a.interval, target_url=self.target_url,
                                 start=start, burst=burst)
        self.started = start.timestamp()
        events = chaos.plan(a.seed, a.seconds, schedulers=2, workers=2, rabbitmq=self.rabbitmq is not None,
                            extra=a.extra_faults)
        self.log(f"{a.jobs} jobs every {a.interval[0]}-{a.interval[1]} s loaded; seed {a.seed}; chaos plan: "
                 + "; ".join(f"{e.action} {e.target} at {e.at:.1f}s" for e in events))
        self.driver = chaos.Driver(self.processes, self.postgres, self.redis, self.log, rabbitmq=self.rabbitmq,
                                   proxies=self.proxies, workdir=self.workdir)
        time.sleep(max(0.0, self.started - time.time()))
        self.driver.run(events, self.started, a.seconds)
        self.log("chaos over: stopping the jobs and draining")
        self.final_jobs = self._retry_db(load.disable_all)
        self.disabled_at = time.time()
        self.drained = self._drain()

    def _retry_db(self, fn, attempts=30):
        from django.db import close_old_connections, connection
        from django.db.utils import InterfaceError, OperationalError

        for _ in range(attempts):
            try:
                close_old_connections()
                return fn()
            except (OperationalError, InterfaceError):
                connection.close()
                time.sleep(1)
        return fn()

    def _unfinished(self):
        from apps.executions.models import Execution

        return Execution.objects.filter(status__in=["queued", "running"]).count()

    def _drain(self):
        deadline = time.monotonic() + self.args.drain_timeout
        drain_started = time.monotonic()
        while time.monotonic() < deadline:
            self.driver.watch(self.started)
            if self._retry_db(self._unfinished) == 0:
                self.log(f"drained in {time.monotonic() - drain_started:.1f}s")
                return time.monotonic() - drain_started
            time.sleep(1)
        self.log(f"not drained after {self.args.drain_timeout}s")
        return None

    # -- the verdict ------------------------------------------------------------------
    def verdict(self):
        from apps.executions.models import Execution

        findings = checks.Findings()
        executions = list(Execution.objects.values("id", "job_id", "scheduled_for", "trigger", "status"))
        attempts = self._attempts()
        requests = read_log(self.target_log)
        faults = self.driver.faults
        checks.check_occurrences(findings, self.final_jobs, executions, disabled_at=self.disabled_at)
        checks.check_final(findings, executions, set(Execution.FINAL_STATUSES))
        checks.check_requests(findings, requests, executions, attempts, faults,
                              reclaims=self._reclaims())
        checks.check_early(findings, requests, executions)
        checks.check_clock_faults(findings, faults, self._read_process_log)
        checks.check_usage(findings, self._usage_total(), len(attempts))
        checks.check_processes(findings, self.driver.unexpected_exits, wait_healthy(self.web_port, 30))
        checks.check_dead_letters(findings, self.driver.poison_sent, self._dead_letters())
        lags = checks.dispatch_lags(requests, executions)
        first_fault = min((f["at"] for f in faults), default=float("inf"))
        checks.lag_figures(findings, lags, faults, first_fault, self.started + self.args.seconds)
        findings.figures.insert(0, ("recorded attempts", f"{len(attempts):,} "
                                                     f"({len(attempts) / (self.args.seconds + (self.drained or 0)):.0f}/s)"))
        findings.figures.append(("drain after the chaos", f"{self.drained:.1f} s" if self.drained is not None
                                 else f"not drained in {self.args.drain_timeout:.0f} s"))
        return findings

    def _read_process_log(self, name, start, end):
        with open(self.workdir / f"{name}.log", "rb") as log:
            log.seek(start)
            return log.read(None if end is None else max(0, end - start)).decode(errors="replace")

    def _dead_letters(self):
        from apps.executions.worker import deadletters

        return deadletters.entries()

    @staticmethod
    def _attempts():
        """Every attempt, a superseded worker's marked (fenced leases: ``superseded_token``)."""
        from apps.executions.models import Attempt

        columns = ["execution_id", "number", "response_status"]
        if any(f.name == "superseded_token" for f in Attempt._meta.fields):
            columns.append("superseded_token")
        return [dict(a, superseded=bool(a.pop("superseded_token", 0))) for a in Attempt.objects.values(*columns)]

    @staticmethod
    def _reclaims():
        """{execution id: lease take-backs}, or None when the schema does not count them."""
        from apps.executions.models import Execution

        if not any(f.name == "lease_reclaims" for f in Execution._meta.fields):
            return None
        return {str(i): n for i, n in Execution.objects.filter(lease_reclaims__gt=0).values_list("id", "lease_reclaims")}

    def _usage_total(self):
        """{counter: total} of the billing app's usage counters, None without metering."""
        try:
            from apps.billing import models
        except ImportError:
            return None
        from django.db.models import Sum

        totals = {}
        for name in ("UsageMonth", "UsageDay"):
            model = getattr(models, name, None)
            if model is not None:
                rows = model.objects.filter(organization_id__in=self.org_ids)
                totals[name] = rows.aggregate(n=Sum("runs"))["n"] or 0
        return totals or None

    def shutdown(self):
        codes = {}
        for process in self.processes:
            codes[process.name] = process.stop()
        self.shutdown_codes = codes
        if self.target and self.target.poll() is None:
            self.target.terminate()
            self.target.wait(10)
        for proxy in self.proxies.values():
            proxy.stop()
        self.redis.stop()
        if self.rabbitmq:
            self.rabbitmq.remove()
        self.postgres.stop()
        self.postgres.remove()

    def summary(self, findings):
        a = self.args
        lines = [
            f"### Chaos soak: {a.seconds:.0f} s, {a.jobs:,} jobs every {a.interval[0]}-{a.interval[1]} s, seed {a.seed}",
            "",
            f"Machine: {os.cpu_count()} CPUs, {_cpu_model()}, load average before the soak {self.load_before}; "
            f"broker {'RabbitMQ' if self.rabbitmq else 'Redis'}; "
            f"web, 2 schedulers, 2 workers (concurrency {a.worker_concurrency}), housekeeping; "
            f"issue 34's faults: {', '.join(a.extra_faults) or 'none'}; "
            f"verdict: **{'PASS' if findings.ok else 'FAIL'}**",
            "",
            "| invariant | result | detail |",
            "|---|---|---|",
            *(f"| {c.name} | {'ok' if c.ok else '**FAILED**'} | {c.detail} |" for c in findings.checks),
            "",
            f"lost / doubled / early / superseded / stuck: {checks.tally_line(findings)}",
            "",
            "| figure | value |",
            "|---|---|",
            *(f"| {name} | {value} |" for name, value in findings.figures),
            "",
            "| when | fault | down for | recovered after | repeated requests it caused |",
            "|---|---|---|---|---|",
            *(f"| {' | '.join(row)} |" for row in checks.fault_rows(self.driver.faults, self.started)),
        ]
        return "\n".join(lines)


def _cpu_model():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return host.processor() or host.machine()


def main(argv=None):
    args = parse_args(argv)
    soak = Soak(args)
    ok = False
    try:
        soak.start_services()
        soak.start_platform()
        soak.run()
        findings = soak.verdict()
        ok = findings.ok
        text = soak.summary(findings)
    finally:
        soak.shutdown()
    codes = ", ".join(f"{name} {code}" for name, code in soak.shutdown_codes.items())
    text += f"\n\nExit codes on SIGTERM at the end: {codes}\n"
    print("\n" + text, flush=True)
    (soak.workdir / "summary.md").write_text(text)
    if args.summary:
        Path(args.summary).write_text(text)
    if ok and not args.keep:
        shutil.rmtree(soak.workdir, ignore_errors=True)
    else:
        print(f"logs kept in {soak.workdir}", flush=True)
    return 0 if ok else 1
