"""The short chaos soak inside ``make test``: real processes on a private PostgreSQL and
Redis, a kill of each process type, one Redis and one PostgreSQL restart, a paused
scheduler; the soak itself checks every invariant and exits non-zero when one fails."""

import os
import subprocess
import sys

import pytest

from soak.platform import ROOT

pytestmark = pytest.mark.slow

SHORT = ["--seconds", os.environ.get("SOAK_SHORT_SECONDS", "90"), "--jobs", "300", "--interval", "10-30",
         "--drain-timeout", "240"]


def test_short_chaos_soak_loses_nothing_and_doubles_nothing():
    # The soak brings its own PostgreSQL and Redis; its logs stay under test-output/ when it fails.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "REDIS_", "CELERY_"))}
    workdir = ROOT / "test-output" / f"soak-{os.getpid()}"
    result = subprocess.run([sys.executable, "-m", "soak", *SHORT, "--workdir", str(workdir)],
                            cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    summary = result.stdout[result.stdout.find("### Chaos soak"):]
    assert result.returncode == 0, f"{summary or result.stdout[-5000:]}\n{result.stderr[-3000:]}"
    assert "verdict: **PASS**" in summary
    for fault in ("SIGKILL worker", "SIGKILL scheduler", "Redis restart", "PostgreSQL restart", "SIGSTOP scheduler"):
        assert fault in summary, f"the soak did not exercise {fault}:\n{summary}"
