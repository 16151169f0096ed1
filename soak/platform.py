"""The platform's processes, started from the Procfile's own command lines."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def procfile_commands(path=ROOT / "Procfile"):
    commands = {}
    for line in Path(path).read_text().splitlines():
        name, sep, command = line.partition(":")
        if sep and name.strip() and not name.startswith("#"):
            commands[name.strip()] = command.strip()
    return commands


class PlatformProcess:
    """One process of the Procfile; ``kill``/``start`` again as the chaos driver needs."""

    def __init__(self, name, command, env, logdir):
        self.name, self.command, self.env = name, command, env
        self.log_path = Path(logdir) / f"{name}.log"
        self.popen = None
        self.starts = 0
        self.expected_down = False
        self.overrides = {}  # extra environment for the next starts (the chaos's libfaketime)

    @property
    def kind(self):
        return re.sub(r"\d+$", "", self.name)

    def start(self):
        log = open(self.log_path, "ab")
        self.popen = subprocess.Popen(["sh", "-c", f"exec {self.command}"], cwd=ROOT, env={**self.env, **self.overrides},
                                      stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.starts += 1
        self.expected_down = False

    def log_size(self):
        """Where its log ends now (the checks read what it logged during a fault)."""
        try:
            return self.log_path.stat().st_size
        except OSError:
            return 0

    def alive(self):
        return self.popen is not None and self.popen.poll() is None

    def signal(self, sig):
        if self.alive():
            os.killpg(self.popen.pid, sig)

    def kill(self):
        """SIGKILL the whole process group (a crash: no clean-up of any kind)."""
        self.expected_down = True
        self.signal(signal.SIGKILL)
        self.popen.wait(10)

    def stop(self, timeout=30):
        """SIGTERM (a deploy): returns the exit code, SIGKILL after ``timeout``."""
        self.expected_down = True
        if not self.alive():
            return self.popen.returncode if self.popen else None
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.popen.wait(10)
            return "killed after timeout"


def platform_processes(env, logdir, *, schedulers=2, workers=2, web_port, worker_concurrency=4):
    commands = procfile_commands()
    env = dict(env, PORT=str(web_port), WEB_CONCURRENCY="1", WORKER_CONCURRENCY=str(worker_concurrency),
               PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}", PYTHONUNBUFFERED="1")
    processes = [PlatformProcess("web", commands["web"].replace("0.0.0.0", "127.0.0.1"), env, logdir)]
    for n in range(1, schedulers + 1):
        processes.append(PlatformProcess(f"scheduler{n}", commands["scheduler"], env, logdir))
    for n in range(1, workers + 1):
        # The Procfile's node names carry the process id, so copies of one type never collide.
        processes.append(PlatformProcess(f"worker{n}", commands["worker_enterprise"], env, logdir))
    processes.append(PlatformProcess("housekeeping", commands["housekeeping"], env, logdir))
    return processes


def run_release(env, logdir):
    """The Procfile's release phase: migrations."""
    command = procfile_commands()["release"]
    env = dict(env, PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}")
    with open(Path(logdir) / "release.log", "ab") as log:
        subprocess.run(["sh", "-c", command], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)


def wait_healthy(port, timeout=60):
    import urllib.request

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
                if response.status == 200:
                    return True
        except OSError:
            time.sleep(0.3)
    return False
