"""A private PostgreSQL cluster and a private Redis server, children of the soak, so the
soak may kill and restart them without touching the machine's shared services."""

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_port(port, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not start on port {port} within {timeout}s")


def _pg_bin():
    found = shutil.which("pg_ctl") and shutil.which("initdb")
    if found:
        return Path(shutil.which("pg_ctl")).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    if not candidates:
        raise RuntimeError("no PostgreSQL server binaries (initdb, pg_ctl) found")
    return Path(candidates[-1]).parent


class PrivatePostgres:
    """``initdb`` into a temporary directory with trust auth, on a free port. PostgreSQL
    refuses to run as root, so as root the cluster belongs to the ``postgres`` user."""

    def __init__(self, workdir):
        self.workdir = Path(workdir)
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        # Its own directory under /tmp: the work directory's parents (pytest's, say) may
        # be closed to the postgres user.
        self.dir = Path(tempfile.mkdtemp(prefix="cronsvc-soak-pg-")) if self.as_user else Path(workdir) / "pg"
        self.data = self.dir / "data"
        self.port = free_port()
        self.bin = _pg_bin()

    @property
    def url(self):
        return f"postgres://postgres@127.0.0.1:{self.port}/cronsvc_soak"

    def _run(self, *args, check=True):
        done = subprocess.run([*self.as_user, str(self.bin / args[0]), *args[1:]],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if check and done.returncode:
            raise RuntimeError(f"{args[0]} failed ({done.returncode}): {done.stderr.strip()}")
        return done

    def init(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.as_user:
            shutil.chown(self.dir, "postgres")
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()
        subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-q",
                        "-c", "CREATE DATABASE cronsvc_soak"], check=True, stdout=subprocess.DEVNULL)

    def start(self):
        # fsync off: the soak tests crashes of the server process, not of the machine.
        options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c max_connections=300 -c shared_buffers=128MB")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.dir / "server.log"), "-w", "start")

    def stop(self, mode="fast"):
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def remove(self):
        """The cluster's files (its server log is copied into the work directory first)."""
        log = self.dir / "server.log"
        if log.exists() and self.as_user:
            shutil.copy(log, self.workdir / "postgres.log")
        if self.as_user:
            shutil.rmtree(self.dir, ignore_errors=True)

    def restart(self, down_seconds=2.0):
        """Crash-stop (``immediate``: no clean shutdown, recovery from WAL) and start again."""
        self.stop("immediate")
        time.sleep(down_seconds)
        self.start()


class PrivateRedis:
    """``redis-server`` without persistence: a restart loses every queued message."""

    def __init__(self, workdir):
        self.dir = Path(workdir)
        self.port = free_port()
        self.popen = None

    @property
    def url(self):
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self):
        log = open(self.dir / "redis.log", "ab")
        self.popen = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "no", "--dir", str(self.dir)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        _wait_port(self.port, 15, "redis-server")

    def stop(self):
        if self.popen and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(10)

    def restart(self, down_seconds=2.0):
        self.stop()
        time.sleep(down_seconds)
        self.start()
