"""Runs one script in the sandbox: check the host can, spawn bwrap through the launcher,
collect capped output until the tree ends or the deadline kills it, say which limit was hit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from . import cgroup, command, seccomp
from .egress import EgressProxy, EgressRules
from .errors import SandboxFailed, SandboxUnavailable, ScriptRejected
from .limits import MAX_SCRIPT_BYTES, Language, Limits, Network, Reason, Result, Script

LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_launch.py")
FORWARDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_forward.py")
_READ_CHUNK = 65536
_DRAIN_GRACE = 1.0  # after a kill, seconds to collect what is still in the pipes
_PROBE_LIMITS = Limits(wall_seconds=10, cpu_seconds=5, max_processes=8)

# Host user ids a run is given when the worker runs as root: one drawn per run, so that the
# process-count rlimit (counted per user, also on the host) is each run's own. No such user
# exists on the host and nothing there is owned by one.
HOST_UIDS = range(1_900_000_000, 2_000_000_000)


@dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str = ""
    cgroups: str = "none"  # "v1" or "v2" when runs get a cgroup of their own


@dataclass
class Sandbox:
    """How this host runs scripts. One per process is enough; the first check is cached."""

    bwrap: str = field(default_factory=lambda: shutil.which("bwrap") or "/usr/bin/bwrap")
    launcher_python: str = sys.executable
    host_uids: range = HOST_UIDS
    use_cgroups: bool = True  # when the host lets the worker make them (cgroup.detect)
    _availability: Availability | None = field(default=None, init=False, repr=False)
    _hierarchy: cgroup.Hierarchy | None = field(default=None, init=False, repr=False)

    def available(self, refresh: bool = False) -> Availability:
        if self._availability is None or refresh:
            self._availability = self._check()
        return self._availability

    def run(self, script: Script, limits: Limits = Limits(), egress: EgressRules | None = None) -> Result:
        """`egress`: what a script that may reach the network (Network.HTTP) reaches through
        its proxy: the worker's address policy and the run's caps (default: public
        addresses only, EgressRules' caps)."""
        validate(script)
        status = self.available()
        if not status.ok:
            raise SandboxUnavailable(f"script jobs cannot run on this host: {status.reason}")
        return self._execute(script, limits, egress or EgressRules())

    def _check(self) -> Availability:
        if not (os.path.isfile(self.bwrap) and os.access(self.bwrap, os.X_OK)):
            return Availability(False, f"bubblewrap not found at {self.bwrap} "
                                       "(install the Debian package 'bubblewrap')")
        try:
            seccomp.filter_program()
        except seccomp.SeccompUnavailable as exc:
            return Availability(False, str(exc))
        self._hierarchy = cgroup.detect() if self.use_cgroups else None
        failure = self._probe()
        if failure and self._hierarchy:  # cgroups are a plus; the sandbox works without
            self._hierarchy = None
            failure = self._probe()
        if failure:
            return Availability(False, failure)
        return Availability(True, cgroups=f"v{self._hierarchy.version}" if self._hierarchy
                            else "none")

    def _probe(self) -> str:
        """Why a trivial script does not run here ("" when it does)."""
        try:
            probe = self._execute(Script(Language.SHELL, b"exit 0\n"), _PROBE_LIMITS)
        except (SandboxFailed, OSError) as exc:
            return f"bubblewrap cannot start a sandbox here: {exc}{_why_not_root(exc)}"
        if probe.exit_code != 0:
            return (f"the sandbox probe exited {probe.exit_code}: "
                    f"{probe.stderr[:300].decode(errors='replace')}")
        return ""

    def _execute(self, script: Script, limits: Limits, egress: EgressRules = EgressRules()) -> Result:
        uid = self._host_uid()
        if script.network is Network.HTTP:  # the relay is one process more, not the script's
            limits = dataclasses.replace(limits, max_processes=limits.max_processes + 1)
        try:
            group = cgroup.RunCgroup(self._hierarchy, limits) if self._hierarchy else None
        except OSError as exc:
            raise SandboxFailed(f"could not make the run's cgroup: {exc}") from exc
        try:
            with _egress_proxy(script, egress, uid) as egress_socket:
                proc, status_read = self._spawn(script, limits, group, uid, egress_socket)
                return _Run(proc, status_read, limits, group).collect()
        finally:
            if group is not None:
                _remove(group)

    def _spawn(self, script: Script, limits: Limits, group: cgroup.RunCgroup | None, uid: int | None,
               egress_socket: str | None):
        fds = _data_files(script)
        status_read, status_write = os.pipe()
        spec = {"rlimits": rlimits(limits, counted_by_cgroup=group is not None),
                "cgroup_procs": group.procs_files if group else [], "uid": uid, "gid": uid}
        argv = [self.launcher_python, "-I", "-S", LAUNCHER, json.dumps(spec),
                *command.bwrap_args(self.bwrap, script, limits, fds, status_write, egress_socket)]
        try:
            proc = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                pass_fds=(*fds.all, status_write),
                start_new_session=True, env={}, cwd="/",
            )
        except BaseException:
            os.close(status_read)
            raise
        finally:
            for fd in (*fds.all, status_write):
                os.close(fd)
        return proc, status_read

    def _host_uid(self) -> int | None:
        """The run's host user (and group) when the worker is root, None to keep the worker's:
        as root bwrap would keep root's capabilities inside, so it runs as nobody-like."""
        if os.geteuid() != 0:
            return None
        return self.host_uids.start + secrets.randbelow(len(self.host_uids))


def _why_not_root(exc: Exception) -> str:
    """The likely cause when a worker that is not root cannot make the run's namespaces: its
    runs' process limit is per user, so the worker's own processes (and in a container, those
    of every container with the same uid) use it up. docs/script-jobs.md, docs/deploy.md."""
    if os.geteuid() == 0 or "Resource temporarily unavailable" not in str(exc):
        return ""
    return (f" (the run's process limit, {_PROBE_LIMITS.max_processes + 2} for this probe, counts every process "
            f"of uid {os.geteuid()} on the host: run the worker as root, which gives each run a user of its own)")


@contextlib.contextmanager
def _egress_proxy(script: Script, egress: EgressRules, uid: int | None):
    """The run's egress proxy socket while the run lasts (None when it has no network)."""
    if script.network is not Network.HTTP:
        yield None
        return
    try:
        proxy = EgressProxy(egress, owner=uid)
    except OSError as exc:
        raise SandboxFailed(f"could not start the run's egress proxy: {exc}") from exc
    with proxy:
        yield proxy.socket_path


def _remove(group: cgroup.RunCgroup) -> None:
    try:
        group.remove()
    except OSError:
        pass  # still busy after its grace: an empty leftover directory, harmless


def validate(script: Script) -> None:
    if not isinstance(script.language, Language):
        raise ScriptRejected("script_language", f"unknown script language {script.language!r}")
    if len(script.source) > MAX_SCRIPT_BYTES:
        raise ScriptRejected("script_too_large",
                             f"a script may be at most {MAX_SCRIPT_BYTES} bytes, "
                             f"this one is {len(script.source)}")
    if not isinstance(script.network, Network) or script.network not in command.NETWORKS:
        raise ScriptRejected("script_network", f"network mode {script.network!r} is not "
                                               "supported")
    try:
        command.environment(script)
    except ValueError as exc:
        raise ScriptRejected("script_env", str(exc)) from exc


def rlimits(limits: Limits, counted_by_cgroup: bool = False) -> dict[str, tuple[int, int]]:
    """Per-process limits, inherited by everything the script starts. The process count is
    per user: bwrap's own two processes (outside and init) count too. A run cgroup's pids.max
    counts the same processes; the rlimit then stays one above it, a backstop, so that the
    cgroup is the limit hit and says so."""
    processes = limits.max_processes + 2 + (1 if counted_by_cgroup else 0)
    return {
        "RLIMIT_CPU": (limits.cpu_seconds, limits.cpu_seconds + 1),  # SIGXCPU, then SIGKILL
        "RLIMIT_AS": (limits.memory_bytes, limits.memory_bytes),
        "RLIMIT_NPROC": (processes, processes),
        "RLIMIT_NOFILE": (limits.open_files, limits.open_files),
        "RLIMIT_CORE": (0, 0),
    }


def _data_files(script: Script) -> command.DataFiles:
    def memfd(name: str, data: bytes) -> int:
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        return fd

    return command.DataFiles(
        script=memfd("script", script.source),
        seccomp=memfd("seccomp", seccomp.filter_program()),
        env=memfd("env", command.env_args(script)),
        etc={path: memfd(os.path.basename(path), text.encode())
             for path, text in command.ETC_FILES.items()},
        forwarder=memfd("forward", _forwarder_source()) if script.network is Network.HTTP else None,
    )


@functools.lru_cache(maxsize=1)
def _forwarder_source() -> bytes:
    with open(FORWARDER, "rb") as source:
        return source.read()


class _Capped:
    """One output stream: the first `limit` bytes are kept, the rest counted and dropped."""

    def __init__(self, limit: int):
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.limit - len(self.data)
        self.data += chunk[:room]
        self.dropped += max(0, len(chunk) - room)


class _Run:
    def __init__(self, proc: subprocess.Popen, status_fd: int, limits: Limits,
                 group: cgroup.RunCgroup | None):
        self.proc, self.limits, self.group = proc, limits, group
        self.started = time.monotonic()
        self.stdout, self.stderr = _Capped(limits.output_bytes), _Capped(limits.output_bytes)
        self.status = _Capped(65536)
        self.streams = {proc.stdout.fileno(): self.stdout, proc.stderr.fileno(): self.stderr,
                        status_fd: self.status}
        self.pipes = {proc.stdout.fileno(): proc.stdout, proc.stderr.fileno(): proc.stderr}
        self.wait_status: int | None = None
        self.cpu = 0.0
        self.timed_out = False
        self.cpu_exceeded = False

    def collect(self) -> Result:
        selector = selectors.DefaultSelector()
        pidfd = os.pidfd_open(self.proc.pid)
        try:
            for fd in self.streams:
                os.set_blocking(fd, False)
                selector.register(fd, selectors.EVENT_READ)
            selector.register(pidfd, selectors.EVENT_READ)
            self._pump(selector, pidfd, self.started + self.limits.wall_seconds)
            if self.wait_status is None:
                self.timed_out = True
                self._kill_tree()
                self._pump(selector, pidfd, time.monotonic() + _DRAIN_GRACE)
        finally:
            selector.close()
            os.close(pidfd)
            for fd in list(self.streams):
                self._close(fd)
        return self._result(time.monotonic() - self.started)

    def _pump(self, selector, pidfd: int, deadline: float) -> None:
        """Read output and watch for the exit until both are done or the deadline."""
        while self.streams or self.wait_status is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return
            if self._over_cpu():
                self.cpu_exceeded = True
                self._kill_tree()
            for key, _ in selector.select(min(remaining, _CPU_POLL)):
                if key.fd == pidfd:
                    selector.unregister(pidfd)
                    self._reap()
                elif not self._read(key.fd):
                    selector.unregister(key.fd)
                    self._close(key.fd)
            if self.wait_status is not None and not self.streams:
                return

    def _over_cpu(self) -> bool:
        """The run as a whole went past its CPU time (each process's RLIMIT_CPU cannot see
        ten processes that use a tenth each)."""
        if self.group is None or self.wait_status is not None:
            return False
        used = self.group.cpu_seconds()
        # a poll's worth over: one process alone meets its own RLIMIT_CPU first (exactly)
        return used is not None and used > self.limits.cpu_seconds + _CPU_POLL

    def _read(self, fd: int) -> bool:
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except BlockingIOError:
            return True
        self.streams[fd].add(chunk)
        return bool(chunk)

    def _close(self, fd: int) -> None:
        if self.streams.pop(fd, None) is None:
            return
        if fd in self.pipes:
            self.pipes.pop(fd).close()
        else:
            os.close(fd)

    def _reap(self) -> None:
        if self.wait_status is not None:  # the kill at the deadline reaped it already
            return
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.wait_status = status
        self.cpu = usage.ru_utime + usage.ru_stime
        self.proc.returncode = os.waitstatus_to_exitcode(status)

    def _kill_tree(self) -> None:
        """SIGKILL bwrap (the launcher's process group). Its init inside the sandbox dies with
        it (--die-with-parent), and with that init the kernel kills every process of the pid
        namespace: children that forked twice or started their own session included."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._reap()
        if self.group is not None:
            self.group.kill()

    def _result(self, duration: float) -> Result:
        exit_code = _exit_code(bytes(self.status.data))
        group_cpu = self.group.cpu_seconds() if self.group else None
        memory_hit = bool(self.group and self.group.memory_hit())
        # the run's end decided by a limit, not by the script: its exit code means nothing
        killed = self.timed_out or self.cpu_exceeded or (exit_code is None and memory_hit)
        if exit_code is None and not killed:
            message = bytes(self.stderr.data[:500]).decode(errors="replace").strip()
            raise SandboxFailed(f"the sandbox did not start: {message or self.proc.returncode}")
        if killed:
            exit_code = None
        sig = exit_code - 128 if exit_code is not None and 128 < exit_code <= 128 + 64 else None
        result = dict(exit_code=exit_code, signal=sig, stdout=bytes(self.stdout.data),
                      stderr=bytes(self.stderr.data), stdout_truncated=self.stdout.dropped > 0,
                      stderr_truncated=self.stderr.dropped > 0, duration=duration,
                      cpu_seconds=max(self.cpu, group_cpu or 0.0))
        hits = dict(memory_hit=memory_hit, pids_hit=self.group.pids_hit(),
                    memory_peak=self.group.memory_peak()) if self.group else {}
        return Result(**result, reason=classify(self.limits, self.timed_out, cpu_exceeded=self.cpu_exceeded,
                                                **hits, **result))


def _exit_code(status: bytes) -> int | None:
    """bwrap's --json-status-fd writes one JSON object per line; the last has "exit-code"
    once the script has run. No such line: bwrap failed while setting up."""
    for line in status.splitlines():
        try:
            fields = json.loads(line)
        except ValueError:
            continue
        if "exit-code" in fields:
            return int(fields["exit-code"])
    return None


# What a refused allocation or fork prints in Python and the shells: the rlimits leave no
# other trace. A script can print these itself, and so only mislabel its own failure.
_MEMORY_MARKS = (b"MemoryError", b"Cannot allocate memory", b"ut of memory", b"bad_alloc")
_PIDS_MARKS = (b"Resource temporarily unavailable", b"Cannot fork", b"fork: retry",
               b"can't fork")


def classify(limits: Limits, timed_out: bool, *, exit_code, signal, stderr, cpu_seconds,
             stdout_truncated, stderr_truncated, memory_hit=False, pids_hit=False,
             memory_peak=None, cpu_exceeded=False, **_) -> Reason | None:
    """The limit that ended or cut the run, the most decisive first. `memory_hit`,
    `pids_hit` and `memory_peak` (bytes) are the run cgroup's own counts, when it had one.

    A program whose allocation the address-space limit refuses may crash rather than say so
    (dash dies of SIGSEGV, a C++ program of SIGABRT): such a death counts as the memory
    limit when the tree's peak memory reached half the limit (the rest of the address space
    is code, stacks and what the allocator reserved), or, without a cgroup to tell, always."""
    if timed_out:
        return Reason.TIMEOUT
    if cpu_exceeded or signal == _SIGXCPU or (signal == _SIGKILL and cpu_seconds >= limits.cpu_seconds):
        return Reason.CPU
    if memory_hit:  # the cgroup's OOM killer ended some process of the run, whatever it exited
        return Reason.MEMORY
    if exit_code != 0:
        tail = stderr[-4096:]
        crashed = signal in _CRASH_SIGNALS and (memory_peak is None or memory_peak * 2 >= limits.memory_bytes)
        if crashed or any(mark in tail for mark in _MEMORY_MARKS):
            return Reason.MEMORY
        if pids_hit or any(mark in tail for mark in _PIDS_MARKS):
            return Reason.PIDS
    if stdout_truncated or stderr_truncated:
        return Reason.OUTPUT
    return None


_CPU_POLL = 0.2  # seconds between two reads of the run's CPU account
_SIGXCPU = int(signal.SIGXCPU)
_CRASH_SIGNALS = frozenset({int(signal.SIGSEGV), int(signal.SIGBUS), int(signal.SIGABRT)})
_SIGKILL = int(signal.SIGKILL)
