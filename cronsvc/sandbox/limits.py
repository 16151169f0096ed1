"""What one sandboxed run may use, what it is given, and what comes back."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

MAX_SCRIPT_BYTES = 64 * 1024


class Language(str, enum.Enum):
    PYTHON = "python"
    SHELL = "shell"


class Network(str, enum.Enum):
    """What the script may reach. Either way the run has a network namespace of its own with
    nothing but its loopback. HTTP adds the run's egress proxy (cronsvc/sandbox/egress.py),
    reached through a Unix socket bound into the sandbox and named by HTTP(S)_PROXY: outbound
    HTTP and HTTPS only, each target checked by the platform's address guard. A value without
    an entry in cronsvc/sandbox/command.py's NETWORKS is refused before the run."""

    NONE = "none"
    HTTP = "http"


class Reason(str, enum.Enum):
    """The limit that ended or cut a run: a stable code to record and show."""

    TIMEOUT = "timeout"  # wall time: the whole process tree was killed at the deadline
    CPU = "cpu"  # a process used its CPU-time limit (SIGXCPU, then SIGKILL)
    MEMORY = "memory"  # an allocation was refused (address-space limit) or the cgroup OOM-killed
    PIDS = "pids"  # a fork was refused at the process-count limit
    OUTPUT = "output"  # stdout or stderr went past its cap; the excess was dropped


@dataclass(frozen=True)
class Limits:
    """Per-run limits (the plan decides them). CPU time and memory apply to each process of
    the run (rlimits); wall time, the process count and output to the run as a whole."""

    wall_seconds: float = 30.0
    cpu_seconds: int = 10
    memory_bytes: int = 256 * 1024 * 1024
    max_processes: int = 32
    output_bytes: int = 64 * 1024  # each of stdout and stderr
    tmp_bytes: int = 16 * 1024 * 1024  # the private /tmp (a tmpfs: it is memory too)
    open_files: int = 64

    def __post_init__(self):
        for name in ("wall_seconds", "cpu_seconds", "memory_bytes", "max_processes",
                     "output_bytes", "tmp_bytes", "open_files"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")


@dataclass(frozen=True)
class Script:
    language: Language
    source: bytes
    env: dict[str, str] = field(default_factory=dict)
    network: Network = Network.NONE


@dataclass(frozen=True)
class Result:
    exit_code: int | None  # None when the run was killed (timeout) before it exited
    signal: int | None  # the signal that ended the script, when one did
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    duration: float  # wall seconds from start to the end of the whole tree
    cpu_seconds: float  # user + system time of the tree, as far as it was reaped
    reason: Reason | None  # the limit that was hit, None when none was

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and self.reason is None
