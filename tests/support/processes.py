"""Start the platform's real processes against the test database and broker."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from django.db import connection

ROOT = Path(__file__).resolve().parents[2]


def test_database_url():
    s = connection.settings_dict
    return f"postgres://{s['USER'] or 'postgres'}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def process_env(**extra):
    env = dict(os.environ)
    env.update(DATABASE_URL=test_database_url(), PYTHONUNBUFFERED="1")
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Process:
    """A child process whose output goes to a log file (read it when a test fails)."""

    def __init__(self, args, env, log_path):
        self.args = args
        self.log_path = Path(log_path)
        self.log = open(self.log_path, "ab")
        self.popen = subprocess.Popen(args, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                      start_new_session=True)

    def kill(self, sig=signal.SIGKILL):
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, sig)

    def stop(self, timeout=15):
        """SIGTERM and wait; returns the exit code."""
        if self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                self.popen.wait(5)
        self.log.close()
        return self.popen.returncode

    def output(self):
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout=60):
        """Until Celery's "ready" line; a timeout shows the log's end (why it did not start)."""
        try:
            wait_for(lambda: "ready" in self.output(), timeout=timeout, message=f"{self.log_path.stem} to start")
        except AssertionError as error:
            raise AssertionError(f"{error}; its log ends:\n{self.output()[-3000:]}") from None


def start_scheduler(tmp_path, name="scheduler", **env):
    args = [sys.executable, "manage.py", "run_scheduler", "--max-sleep", "0.2"]
    return Process(args, process_env(**env), tmp_path / f"{name}.log")


def start_worker(tmp_path, queues, name="worker", concurrency=4, **env):
    """A Celery worker with the Procfile's pool (``procfile_pool``), so the tests exercise
    what production runs."""
    args = [sys.executable, "-m", "celery", "-A", "config", "worker", "--queues", ",".join(queues),
            "--pool", procfile_pool(), "--concurrency", str(concurrency), "--hostname", unique_node_name(name),
            "--without-mingle", "--without-gossip", "--loglevel", "INFO"]
    return Process(args, process_env(**env), tmp_path / f"{name}.log")


def unique_node_name(name):
    """A Celery node name no other test's worker has: on RabbitMQ a node's control queue is
    exclusive, so two live workers of one name (parallel tests) crash the second."""
    return f"{name}-{uuid.uuid4().hex[:8]}@%h"


def procfile_pool(name="worker_pro"):
    """The ``--pool`` of a Procfile worker line (Celery's default, prefork, when absent)."""
    words = procfile_command(name).split()
    return words[words.index("--pool") + 1] if "--pool" in words else "prefork"


def wait_for(predicate, timeout, interval=0.1, message="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")


def procfile_command(name):
    """A process type's command line from the Procfile, as honcho or Heroku would run it."""
    for line in (ROOT / "Procfile").read_text().splitlines():
        key, sep, command = line.partition(":")
        if sep and key.strip() == name:
            return command.strip()
    raise KeyError(name)


def start_procfile_process(tmp_path, name, log_name=None, **env):
    """Run a Procfile process type through the shell (``exec``: signals reach it directly)."""
    args = ["sh", "-c", f"exec {procfile_command(name)}"]
    environment = process_env(**env)
    environment["PATH"] = f"{Path(sys.executable).parent}:{environment.get('PATH', '')}"
    return Process(args, environment, tmp_path / f"{log_name or name}.log")


def free_port():
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
