"""A private PostgreSQL cluster, Redis server and RabbitMQ node, children of the soak (and
of the tests that restart a broker), so they may be killed and restarted without touching
the machine's shared services."""

import glob
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def free_port():
    """A free port below the kernel's ephemeral range. The services here are restarted on
    the same port, and while one is down an ephemeral port may become some connection's
    source port (a RabbitMQ node then failed to come back: eaddrinuse)."""
    low = _ephemeral_low()
    rng = random.SystemRandom()
    for _ in range(500):
        port = rng.randrange(10_000, low) if low > 11_000 else 0
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise RuntimeError("no free port below the ephemeral range")


def _ephemeral_low():
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


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

    def client(self):
        import redis

        return redis.Redis.from_url(self.url, socket_connect_timeout=5, socket_timeout=5)

    def hold_at_maxmemory(self, below=100_000):
        """Redis full, as at ``maxmemory`` with noeviction: every write refused, reads and
        deletions allowed. Held below its usage, so no stray write slips through."""
        with self.client() as client:
            used = client.info("memory")["used_memory"]
            client.config_set("maxmemory-policy", "noeviction")
            client.config_set("maxmemory", str(max(1, used - below)))

    def release_memory(self):
        with self.client() as client:
            client.config_set("maxmemory", "0")


def _rabbitmq_bin(name):
    """RabbitMQ's own scripts. Debian's /usr/sbin wrappers would run the node as the
    ``rabbitmq`` user with its home (the shared node's Erlang cookie); these run as the
    caller, with the private node's directory as home."""
    packaged = Path("/usr/lib/rabbitmq/bin") / name
    if packaged.exists():
        return str(packaged)
    found = shutil.which(name)
    if not found:
        raise RuntimeError(f"no RabbitMQ server scripts ({name}) found: install rabbitmq-server")
    return found


class PrivateRabbitMQ:
    """A RabbitMQ node of its own: its own node name, AMQP and distribution ports (free
    ones, on 127.0.0.1), data and log directories, configuration and (empty) plugin list,
    so nothing is shared with the machine's node but the Erlang port mapper.

    ``restart`` is a crash (SIGKILL): what RabbitMQ confirmed of persistent messages in
    durable queues comes back from its disk; ``restart(wipe=True)`` brings it back empty,
    as a replaced node or a lost disk would."""

    def __init__(self, workdir):
        self.dir = Path(workdir) / "rabbitmq"
        self.port, self.dist_port = free_port(), free_port()
        self.node = f"cronsvc-{self.port}@localhost"
        self.popen = None

    @property
    def url(self):
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    def _env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("RABBITMQ_", "ERL_"))}
        files = self.dir
        env.update(
            HOME=str(files),  # the node's and rabbitmqctl's Erlang cookie
            RABBITMQ_NODENAME=self.node, RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_NODE_PORT=str(self.port),
            RABBITMQ_DIST_PORT=str(self.dist_port), RABBITMQ_MNESIA_BASE=str(files / "mnesia"),
            RABBITMQ_LOG_BASE=str(files / "log"), RABBITMQ_PID_FILE=str(files / "node.pid"),
            RABBITMQ_CONFIG_FILE=str(files / "rabbitmq.conf"),
            RABBITMQ_ADVANCED_CONFIG_FILE=str(files / "advanced.config"),
            RABBITMQ_ENABLED_PLUGINS_FILE=str(files / "enabled_plugins"),
            RABBITMQ_CONF_ENV_FILE=str(files / "rabbitmq-env.conf"),  # not the machine's (its NODENAME)
            # Distribution on loopback only, as the machine's node.
            RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
        )
        return env

    def _write_config(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        (self.dir / "rabbitmq.conf").write_text(f"listeners.tcp.1 = 127.0.0.1:{self.port}\nlog.console = false\n")
        (self.dir / "enabled_plugins").write_text("[].\n")
        (self.dir / "rabbitmq-env.conf").write_text("")

    def start(self, timeout=90):
        self._write_config()
        (self.dir / "node.pid").unlink(missing_ok=True)
        log = open(self.dir / "server.out", "ab")
        self.popen = subprocess.Popen([_rabbitmq_bin("rabbitmq-server")], env=self._env(), cwd=self.dir,
                                      stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        # Waits for the pid file, the node and then the broker application.
        done = self.ctl("wait", str(self.dir / "node.pid"), "--timeout", str(timeout), check=False)
        if done.returncode or self.popen.poll() is not None:
            self.stop()
            raise RuntimeError(f"RabbitMQ node {self.node} did not start: {done.stdout[-2000:]}"
                               f"{(self.dir / 'server.out').read_text(errors='replace')[-3000:]}")
        _wait_port(self.port, 15, "rabbitmq-server")

    def ctl(self, *args, check=True):
        """``rabbitmqctl -n NODE ...`` against this node."""
        return subprocess.run([_rabbitmq_bin("rabbitmqctl"), "-n", self.node, *args], env=self._env(),
                              capture_output=True, text=True, check=check, timeout=120)

    def stop(self):
        """SIGKILL the node's process group (beam and its helpers): a crash."""
        if self.popen and self.popen.poll() is None:
            os.killpg(self.popen.pid, signal.SIGKILL)
            self.popen.wait(10)

    def restart(self, down_seconds=2.0, wipe=False):
        self.stop()
        if wipe:
            shutil.rmtree(self.dir / "mnesia", ignore_errors=True)
        time.sleep(down_seconds)
        self.start()

    def remove(self):
        self.stop()
        shutil.rmtree(self.dir / "mnesia", ignore_errors=True)


class FaultProxy:
    """``soak/proxy.py`` in front of a service's port, for the platform's processes: the
    chaos cuts every connection through it, or blackholes it for a while."""

    def __init__(self, workdir, name, upstream_port):
        self.workdir, self.name, self.upstream_port = Path(workdir), name, upstream_port
        self.popen = None
        self.port = None

    def start(self):
        self.popen = subprocess.Popen([sys.executable, "-m", "soak.proxy", str(self.upstream_port)],
                                      cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE,
                                      stderr=open(self.workdir / f"proxy-{self.name}.err", "ab"), text=True,
                                      start_new_session=True)
        self.port = int(self.popen.stdout.readline())

    def url(self, direct_url):
        """``direct_url`` with the service's port replaced by the proxy's."""
        return direct_url.replace(f"127.0.0.1:{self.upstream_port}", f"127.0.0.1:{self.port}", 1)

    def cut(self):
        self.popen.send_signal(signal.SIGUSR1)

    def blackhole(self):
        self.popen.send_signal(signal.SIGUSR2)

    def restore(self):
        self.popen.send_signal(signal.SIGHUP)

    def stop(self):
        if self.popen and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(10)
