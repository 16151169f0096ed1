"""The embedded mode (`make run`: SQLite, no server) in a process of its own, on a fresh
database: for the tests of what only SQLite does differently."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def embedded_manage(var_dir, timeout=300):
    """A ``manage.py`` runner on the embedded defaults (no DATABASE_URL, REDIS_URL or
    SECRET_KEY from the test run) with its files under ``var_dir``; returns its stdout and
    fails the test on a non-zero exit. The database is migrated first."""
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"}}
    env["VAR_DIR"] = str(var_dir)

    def manage(*args):
        result = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                                text=True, timeout=timeout, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    manage("migrate", "--verbosity", "0")
    return manage


def embedded_shell(var_dir, script):
    """``script`` run by ``manage.py shell`` in a fresh embedded process; returns its stdout."""
    return embedded_manage(var_dir)("shell", "--no-imports", "-c", script)
