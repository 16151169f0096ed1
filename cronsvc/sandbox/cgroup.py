"""A cgroup per run, when the host lets the worker make them: the whole tree's memory (its
/tmp pages included) and process count held together, and an exact account of which of the
two was hit. The rlimits stay in force either way; without cgroups each process may use the
memory limit and the process limit bounds how many there are.

Each run's cgroup is a child of the worker's own cgroup (in the memory and pids hierarchies
of cgroup v1, or in the unified v2 hierarchy when the worker's cgroup delegates both
controllers to its children): it can only tighten what the worker is already given.
"""

from __future__ import annotations

import os
import secrets
import signal
import time
from dataclasses import dataclass

from .limits import Limits

PREFIX = "cronsvc-run-"
_REMOVE_WITHIN = 2.0  # seconds to wait for killed processes to leave before rmdir


@dataclass(frozen=True)
class Hierarchy:
    """Where run cgroups go: one parent directory per controller (one for both on v2)."""

    version: int
    memory: str
    pids: str
    cpu: str | None = None  # v1's cpuacct (None: not mounted); v2 counts CPU in every cgroup


def detect(proc_self: str = "/proc/self") -> Hierarchy | None:
    """The worker's own cgroups, if it may create children in them; None otherwise."""
    mounts = _mounts_from(_read(f"{proc_self}/mountinfo"))
    own = _own_paths_from(_read(f"{proc_self}/cgroup"))
    if "memory" in mounts and "pids" in mounts and "memory" in own and "pids" in own:
        cpu = mounts["cpuacct"] + own["cpuacct"] if "cpuacct" in mounts and "cpuacct" in own else None
        found = Hierarchy(1, mounts["memory"] + own["memory"], mounts["pids"] + own["pids"], cpu)
    elif "cgroup2" in mounts and "" in own:
        parent = mounts["cgroup2"] + own[""]
        if not {"memory", "pids"} <= set(_read(f"{parent}/cgroup.subtree_control").split()):
            return None
        found = Hierarchy(2, parent, parent, parent)
    else:
        return None
    return found if _can_create(found) else None


class RunCgroup:
    """One run's cgroup: made before the run, its limits written, removed after."""

    def __init__(self, hierarchy: Hierarchy, limits: Limits):
        self.hierarchy = hierarchy
        name = PREFIX + secrets.token_hex(8)
        self.memory = os.path.join(hierarchy.memory, name)
        self.pids = os.path.join(hierarchy.pids, name)
        self.cpu = os.path.join(hierarchy.cpu, name) if hierarchy.cpu else None
        self.dirs = sorted({self.memory, self.pids, *([self.cpu] if self.cpu else [])})
        for path in self.dirs:
            os.mkdir(path)
        try:
            self._limit(limits)
        except OSError:
            self.remove()
            raise

    def _limit(self, limits: Limits) -> None:
        # The tree's memory: each process's limit plus the /tmp it may fill (tmpfs pages are
        # charged to the cgroup of the process that wrote them). No swap to hide in.
        total = str(limits.memory_bytes + limits.tmp_bytes)
        pids = str(limits.max_processes + 2)  # bwrap's two processes are in it too
        if self.hierarchy.version == 2:
            _write(f"{self.memory}/memory.max", total)
            _write_if_exists(f"{self.memory}/memory.swap.max", "0")
            _write(f"{self.pids}/pids.max", pids)
        else:
            _write(f"{self.memory}/memory.limit_in_bytes", total)
            _write_if_exists(f"{self.memory}/memory.memsw.limit_in_bytes", total)
            _write(f"{self.pids}/pids.max", pids)

    @property
    def procs_files(self) -> list[str]:
        """What the launcher writes its pid into, before it execs bwrap."""
        return [os.path.join(path, "cgroup.procs") for path in self.dirs]

    def cpu_seconds(self) -> float | None:
        """CPU time used by every process the run ever had, the ones killed or never waited
        for included (bwrap's rusage counts only what was reaped up its own tree); None
        when the host gives no CPU account."""
        if self.cpu is None:
            return None
        if self.hierarchy.version == 2:
            return _counter(f"{self.cpu}/cpu.stat", "usage_usec") / 1e6
        usage = _read(f"{self.cpu}/cpuacct.usage").strip()
        return int(usage) / 1e9 if usage.isdigit() else None

    def memory_hit(self) -> bool:
        if self.hierarchy.version == 2:
            return _counter(f"{self.memory}/memory.events", "oom_kill") > 0
        return _counter(f"{self.memory}/memory.oom_control", "oom_kill") > 0

    def memory_peak(self) -> int:
        """The most memory the run's tree held at once, in bytes (0 when not known)."""
        name = "memory.peak" if self.hierarchy.version == 2 else "memory.max_usage_in_bytes"
        peak = _read(f"{self.memory}/{name}").strip()
        return int(peak) if peak.isdigit() else 0

    def pids_hit(self) -> bool:
        """v1 counts no "max" event here (the kernel keeps that count for v2 only), so a peak
        at the limit counts as reaching it too."""
        if _counter(f"{self.pids}/pids.events", "max") > 0:
            return True
        peak = _read(f"{self.pids}/pids.peak").strip()
        limit = _read(f"{self.pids}/pids.max").strip()
        return peak.isdigit() and limit.isdigit() and int(peak) >= int(limit)

    def kill(self) -> None:
        """Every process still in the run's cgroup (the pid namespace's end does it too)."""
        if self.hierarchy.version == 2 and os.path.exists(f"{self.pids}/cgroup.kill"):
            _write(f"{self.pids}/cgroup.kill", "1")
            return
        for pid in self._pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def remove(self) -> None:
        end = time.monotonic() + _REMOVE_WITHIN
        for path in self.dirs:
            while True:
                try:
                    os.rmdir(path)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # EBUSY: killed processes not yet reaped by the host's init
                    if time.monotonic() > end:
                        raise
                    self.kill()
                    time.sleep(0.01)

    def _pids(self) -> list[int]:
        return [int(line) for line in _read(f"{self.pids}/cgroup.procs").split()]


def _mounts_from(mountinfo: str) -> dict[str, str]:
    """Mount point per v1 controller, and of the v2 hierarchy under "cgroup2"."""
    found: dict[str, str] = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        separator = fields.index("-")
        fstype, point, options = fields[separator + 1], fields[4], fields[-1].split(",")
        if fstype == "cgroup2":
            found.setdefault("cgroup2", point)
        elif fstype == "cgroup":
            for controller in ("memory", "pids", "cpuacct"):
                if controller in options:
                    found.setdefault(controller, point)
    return found


def _own_paths_from(proc_cgroup: str) -> dict[str, str]:
    """The process's cgroup path per v1 controller, and the v2 one under ""."""
    found: dict[str, str] = {}
    for line in proc_cgroup.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path.rstrip("/")
    return found


def _can_create(hierarchy: Hierarchy) -> bool:
    try:
        RunCgroup(hierarchy, Limits()).remove()
    except OSError:
        return False
    return True


def _counter(path: str, key: str) -> int:
    for line in _read(path).splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return 0


def _read(path: str) -> str:
    try:
        with open(path) as file:
            return file.read()
    except OSError:
        return ""


def _write(path: str, value: str) -> None:
    with open(path, "w") as file:
        file.write(value)


def _write_if_exists(path: str, value: str) -> None:
    if os.path.exists(path):
        _write(path, value)
