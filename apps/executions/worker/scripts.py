"""Script jobs in the worker: run a job's script in the sandbox (cronsvc.sandbox) and turn
what it did into a result recorded like an HTTP response. docs/script-jobs.md

A run blocks for up to the plan's wall time, so scripts go to a pool of their own
(SCRIPT_WORKERS threads per process), never to the HTTP delivery loop or its threads. Each
worker that can sandbox says so in Redis (SANDBOX_REPORT_KEY with a TTL, refreshed while it
runs): the web refuses to create a script job when no worker has said so lately
(apps/jobs/scripts.py).
"""

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings

from cronsvc.delivery.outcome import DeliveryResult, Outcome, storable_text
from cronsvc.sandbox import (EgressRules, Language, Limits, Network, Reason, SandboxFailed, SandboxUnavailable, Script,
                             ScriptRejected, run_script, sandbox_available)

from .outbound import outbound_policy

log = logging.getLogger("cronsvc.worker")

AVAILABLE_TTL = 180  # seconds a worker's report holds
_REPORT_EVERY = 60

# error_kind of a failed script run (Attempt.error_kind); a reason of the sandbox maps to one.
SCRIPT_EXIT = "script_exit"  # exited non-zero: retried like an HTTP 5xx
REASON_KINDS = {Reason.TIMEOUT: "timeout", Reason.CPU: "cpu_limit", Reason.MEMORY: "oom",
                Reason.PIDS: "process_limit", Reason.OUTPUT: "output_limit"}
# The error kinds of a script run that never started: the sandbox was unavailable or did not
# set up, or refused the script as given (every ScriptRejected code). Not metered (docs/billing.md).
NOT_STARTED = frozenset({"sandbox_unavailable", "sandbox_failed", "sandbox_error", "script_language",
                         "script_too_large", "script_network", "script_env"})
# Retried like an HTTP 5xx: SCRIPT_EXIT, the limits but timeout (retry_on_timeout decides) and
# sandbox_failed (cronsvc/delivery/retry.py ALWAYS_RETRIED). Final: sandbox_unavailable and
# every ScriptRejected code.


def is_script(job):
    return job.kind == job.Kind.SCRIPT


def script_of(job):
    """The job's script as the sandbox takes it: with network, outbound HTTP(S) through the
    run's egress proxy only (cronsvc/sandbox/egress.py)."""
    return Script(Language(job.script_language or "python"), job.script_source.encode(),
                  env=dict(job.script_env or {}),
                  network=Network.HTTP if job.script_allow_network else Network.NONE)


def ScriptResult(**fields):  # noqa: N802 - a DeliveryResult, so the recording path takes it as it is
    """The response columns hold stdout (body), and the exit code, stderr and flags (headers)."""
    return DeliveryResult(**fields)


def execute(job, plan):
    """Run ``job``'s script under ``plan``'s limits; never raises for what the script or the
    sandbox did (that is the result's error_kind)."""
    started = time.monotonic()
    try:
        result = run_script(script_of(job), script_limits(plan), egress_rules())
    except (SandboxUnavailable, SandboxFailed, ScriptRejected) as exc:
        if isinstance(exc, SandboxUnavailable):
            log.error("script job %s: the sandbox is unavailable on this worker: %s", job.id, exc.message)
        return ScriptResult(status_code=None, headers={}, body_excerpt="", body_truncated=False,
                            duration_ms=(time.monotonic() - started) * 1000, remote_addr=None,
                            error_kind=exc.code, error_message=exc.message)
    kind, message = None, None
    if result.reason is not None:
        kind = REASON_KINDS[result.reason]
        message = f"the script hit its {result.reason.value} limit"
    elif result.exit_code != 0:
        kind, message = SCRIPT_EXIT, f"the script exited {result.exit_code}"
    if kind and result.exit_code not in (None, 0):
        message += f" (exit {result.exit_code})"
    headers = {"exit-code": "" if result.exit_code is None else str(result.exit_code),
               "stderr": storable_text(result.stderr.decode(errors="replace")),
               "stdout-truncated": str(result.stdout_truncated).lower(),
               "stderr-truncated": str(result.stderr_truncated).lower(),
               "cpu-seconds": f"{result.cpu_seconds:.3f}"}
    if result.signal:
        headers["signal"] = str(result.signal)
    if result.reason is not None:
        headers["reason"] = result.reason.value
    return ScriptResult(status_code=None, headers=headers, body_excerpt=storable_text(result.stdout.decode(errors="replace")),
                        body_truncated=result.stdout_truncated, duration_ms=result.duration * 1000,
                        remote_addr=None, error_kind=kind, error_message=message)


def script_limits(plan):
    """The sandbox limits of one script run on ``plan`` (its script_* fields, plans.Plan)."""
    return Limits(wall_seconds=float(plan.script_wall_seconds), cpu_seconds=plan.script_cpu_seconds,
                  memory_bytes=plan.script_memory_mb << 20, max_processes=plan.script_max_processes,
                  output_bytes=plan.script_output_kib << 10, tmp_bytes=plan.script_tmp_mb << 20)


def egress_rules():
    """What a script with network reaches: this worker's outbound policy (the one its HTTP
    deliveries use: OUTBOUND_ALLOW_PRIVATE, OUTBOUND_ALLOWED_NETWORKS/PORTS) and the egress
    proxy's own caps per run."""
    return EgressRules(policy=outbound_policy())


def outcome(result):
    if result.error_kind is None:
        return Outcome(True, None, "exit 0")
    return Outcome(False, result.error_kind, result.error_message or result.error_kind)


_pool_lock = threading.Lock()
_pool = None


def pool():
    """The process's script threads (made on first use)."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=settings.SCRIPT_WORKERS, thread_name_prefix="script")
        return _pool


# -- whether the cluster can sandbox

def report_availability(client):
    """Check this host once and, when it can sandbox, say so for AVAILABLE_TTL seconds."""
    status = sandbox_available()
    if not status.ok:
        log.warning("script jobs cannot run on this worker: %s", status.reason)
        return False
    if client is not None:
        client.set(settings.SANDBOX_REPORT_KEY, status.cgroups, ex=AVAILABLE_TTL)
    return True


def start_reporting():
    """In a worker process: report now, then every minute (a daemon thread)."""
    from ..shared_redis import redis_client

    client = redis_client()

    def loop():
        while True:
            try:
                if not report_availability(client):
                    return
            except Exception:  # noqa: BLE001 - Redis away for a while: try again later
                log.warning("could not report the sandbox's availability", exc_info=True)
            time.sleep(_REPORT_EVERY)

    threading.Thread(target=loop, name="sandbox-report", daemon=True).start()


