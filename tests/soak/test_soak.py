"""The short chaos soaks inside ``make test``: real processes on a private PostgreSQL and
Redis (and, in the second, a private RabbitMQ node as the broker), a kill of each process
type, one Redis and one PostgreSQL restart (and one RabbitMQ crash), a paused scheduler,
Redis held at maxmemory and a burst of poison messages on the workers' queue; on the Redis
broker also issue 34's faults: a skewed and a jumping scheduler clock, a worker paused past
its lease, connections to PostgreSQL and Redis cut and blackholed, 300 runs due at once.
The soak itself checks every invariant and exits non-zero when one fails."""

import os
import subprocess
import sys

import pytest

from soak.platform import ROOT

pytestmark = pytest.mark.slow

SHORT = ["--jobs", "300", "--interval", "10-30", "--drain-timeout", "240"]
FAULTS = ("SIGKILL worker", "SIGKILL scheduler", "Redis restart", "PostgreSQL restart", "SIGSTOP scheduler",
          "Redis at maxmemory", "poison messages")
ISSUE_34_FAULTS = ("clock +30 s scheduler", "clock jump +1 h scheduler", "SIGSTOP worker",
                   "PostgreSQL connections cut", "Redis connections cut", "PostgreSQL blackholed", "Redis blackholed",
                   "burst of 300 runs due at once", "a scheduler with a wrong clock saw its skew and went on claiming")


def run_soak(*args, name="soak"):
    """The soak's summary, asserting it passed. It brings its own services; its logs stay
    under test-output/ when it fails."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "REDIS_", "CELERY_"))}
    workdir = ROOT / "test-output" / f"{name}-{os.getpid()}"
    result = subprocess.run([sys.executable, "-m", "soak", *args, "--workdir", str(workdir)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    summary = result.stdout[result.stdout.find("### Chaos soak"):]
    assert result.returncode == 0, f"{summary or result.stdout[-5000:]}\n{result.stderr[-3000:]}"
    assert "verdict: **PASS**" in summary
    return summary


def assert_exercised(summary, faults):
    for fault in faults:
        assert fault in summary, f"the soak did not exercise {fault}:\n{summary}"


def test_short_chaos_soak_loses_nothing_and_doubles_nothing():
    summary = run_soak(*SHORT, "--seconds", os.environ.get("SOAK_SHORT_SECONDS", "90"), "--extra-faults", "all")
    assert_exercised(summary, (*FAULTS, *ISSUE_34_FAULTS))


def test_short_chaos_soak_on_rabbitmq_loses_nothing_and_doubles_nothing():
    seconds = os.environ.get("SOAK_RABBITMQ_SECONDS", "60")
    summary = run_soak(*SHORT, "--seconds", seconds, "--broker", "rabbitmq", "--extra-faults", "none",
                       name="soak-rabbitmq")
    assert "broker RabbitMQ" in summary
    assert_exercised(summary, (*FAULTS, "RabbitMQ restart"))
