"""A command in a terminal (pexpect), as a person runs it: answer its prompts, read what it
prints, keep its output drained to a log while it runs, and stop it with Ctrl-C."""

import os
import threading
import time
from pathlib import Path

import pexpect

# The machine's environment, less what a self-hoster's own files must provide.
LEFT_OUT = ("DATABASE_", "REDIS_", "CELERY_", "SECRET_KEY", "DJANGO_", "PYTEST", "VIRTUAL_ENV", "MAKE")


def clean_environment(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(LEFT_OUT)}
    # What runs in the terminal makes and activates its own virtualenv; the test's must not be found first.
    env["PATH"] = ":".join(p for p in env.get("PATH", "").split(":") if ".venv" not in p and "/venv" not in p)
    env.update({k: str(v) for k, v in extra.items()})
    return env


class Terminal:
    def __init__(self, command, args, cwd, env, log_path, timeout=900):
        self.cwd = Path(cwd)
        self.log_path = Path(log_path)
        self.child = pexpect.spawn(command, args, cwd=str(cwd), env=env, encoding="utf-8", codec_errors="replace",
                                   timeout=timeout, dimensions=(50, 250))
        self.child.logfile_read = open(log_path, "w")

    def expect(self, pattern, timeout=-1):
        """Wait for ``pattern`` (a regex; pexpect's ``.`` matches newlines too); its match."""
        self.child.expect(pattern, timeout=timeout)
        return self.child.match

    def send(self, line):
        self.child.sendline(line)

    def drain(self):
        """From here the processes write on: keep reading so the terminal never fills up."""
        threading.Thread(target=self.child.expect, args=(pexpect.EOF,), kwargs={"timeout": None}, daemon=True).start()

    def output(self):
        return self.log_path.read_text(errors="replace")

    def interrupt(self, timeout=90):
        """Ctrl-C, then wait; True when everything stopped in time. Whatever still runs from
        ``cwd`` afterwards is killed (a failed test must not leave processes behind)."""
        if self.child.isalive():
            self.child.sendintr()
        deadline = time.monotonic() + timeout
        while self.child.isalive() and time.monotonic() < deadline:
            time.sleep(0.5)
        stopped = not self.child.isalive()
        self.child.terminate(force=True)
        kill_processes_in(self.cwd)
        return stopped


def kill_processes_in(folder):
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd").startswith(str(folder)):
                os.kill(int(pid), 9)
        except OSError:
            pass
