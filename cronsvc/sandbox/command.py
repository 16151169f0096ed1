"""The bwrap command line for one run: what the script sees of the machine.

Inside: a read-only root holding only the interpreter's files (/usr/bin and /usr/lib with the
usual /bin, /lib, /lib64 links; not /usr/local, /usr/share, /etc, /home, /root, /var or the
repository), a fresh /proc of its own pid namespace, a minimal /dev, a private size-capped
tmpfs /tmp that is its home and working directory, three generated files in /etc (passwd,
group, hosts) and the script itself, read-only, at /sandbox/script. Every namespace is new
(user, pid, net, mount, ipc, uts, cgroup); the script runs as an unprivileged user with no
capabilities, in a new session (no terminal to inject into), under the seccomp filter.
A run that may reach the network (Network.HTTP) also gets its egress proxy's socket, the
relay that serves it on 127.0.0.1 (_forward.py) and the public CA bundle (NETWORKS).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from .egress import PROXY_PORT
from .limits import Language, Limits, Network, Script

SCRIPT_PATH = "/sandbox/script"
FORWARDER_PATH = "/sandbox/forward.py"
EGRESS_SOCKET = "/sandbox/egress.sock"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
PROXY_URL = f"http://127.0.0.1:{PROXY_PORT}"
PROXY_ENV = {name: PROXY_URL for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
SANDBOX_UID = 1000
SANDBOX_GID = 1000

# Read-only in the sandbox: the interpreters and the libraries they load.
RUNTIME_DIRS = ("/usr/bin", "/usr/lib", "/usr/lib64")
ROOT_LINKS = ("/bin", "/lib", "/lib64", "/sbin")  # links into /usr on merged-/usr hosts
RUNTIME_FILES = ("/etc/ld.so.cache",)  # the loader's index: no secret, saves a directory scan

INTERPRETERS = {
    # -I: no user site, no PYTHON* variables, no script directory on sys.path; -B: writes
    # no .pyc; -u: output is not lost in a buffer when the run is killed at its deadline.
    Language.PYTHON: ("/usr/bin/python3", "-I", "-B", "-u", SCRIPT_PATH),
    Language.SHELL: ("/bin/sh", SCRIPT_PATH),
}

BASE_ENV = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "USER": "sandbox",
    "LOGNAME": "sandbox",
    "LANG": "C.UTF-8",
    "TZ": "UTC",
}
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
MAX_ENV_VARIABLES = 100
MAX_ENV_BYTES = 32 * 1024  # names and values together: they travel on bwrap's command line

ETC_FILES = {
    "/etc/passwd": f"sandbox:x:{SANDBOX_UID}:{SANDBOX_GID}:sandbox:/tmp:/bin/sh\n",
    "/etc/group": f"sandbox:x:{SANDBOX_GID}:\n",
    "/etc/hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost\n",
}


@dataclass(frozen=True)
class DataFiles:
    """File descriptors (readable, at offset 0) that bwrap copies into the sandbox."""

    script: int
    seccomp: int
    env: int  # env_args(), read by bwrap's --args
    etc: dict[str, int]
    forwarder: int | None = None  # _forward.py, when the run may reach the network

    @property
    def all(self) -> tuple[int, ...]:
        extra = () if self.forwarder is None else (self.forwarder,)
        return (self.script, self.seccomp, self.env, *self.etc.values(), *extra)


def environment(script: Script) -> dict[str, str]:
    """The script's environment: the fixed base plus the job's own variables (which may not
    replace the base: PATH or HOME pointing elsewhere would only break the runtime)."""
    if len(script.env) > MAX_ENV_VARIABLES:
        raise ValueError(f"at most {MAX_ENV_VARIABLES} environment variables")
    if sum(len(n.encode()) + len(v.encode()) for n, v in script.env.items()) > MAX_ENV_BYTES:
        raise ValueError(f"the environment may hold at most {MAX_ENV_BYTES} bytes")
    env = dict(BASE_ENV)
    for name, value in script.env.items():
        if not _ENV_NAME.fullmatch(name) or "\0" in value:
            raise ValueError(f"invalid environment variable {name!r}")
        if name not in BASE_ENV:
            env[name] = value
    if script.network is Network.HTTP:
        env.update(PROXY_ENV)
    return env


def bwrap_args(bwrap: str, script: Script, limits: Limits, files: DataFiles,
               status_fd: int, egress_socket: str | None = None) -> list[str]:
    """`status_fd`: where bwrap writes its JSON status lines (the script's exit code);
    `egress_socket`: the run's egress proxy (cronsvc/sandbox/egress.py) on the host, for a
    script that may reach the network."""
    args = [bwrap, "--json-status-fd", str(status_fd), "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
            "--cap-drop", "ALL", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID),
            "--hostname", "sandbox"]
    args += _runtime_args()
    args += ["--proc", "/proc", "--dev", "/dev",
             "--size", str(limits.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
    for path, fd in files.etc.items():
        args += ["--perms", "0444", "--ro-bind-data", str(fd), path]
    args += ["--perms", "0444", "--ro-bind-data", str(files.script), SCRIPT_PATH]
    network_args, program = NETWORKS[script.network](files, egress_socket)
    args += network_args
    # Both tmpfs mounts bwrap made itself (the root and /dev) are read-only: /dev's has no
    # size cap, and a script filling it would fill the host's memory. The device nodes are
    # bind mounts of their own and stay writable (/dev/null).
    args += ["--remount-ro", "/", "--remount-ro", "/dev", "--chdir", "/tmp", "--clearenv"]
    args += ["--args", str(files.env)]
    args += ["--seccomp", str(files.seccomp), "--"]
    return args + program + list(INTERPRETERS[script.language])


def _no_network(files: DataFiles, egress_socket: str | None) -> tuple[list[str], list[str]]:
    """--unshare-all already gave the run a network namespace with only loopback."""
    return [], []


def _http_proxy(files: DataFiles, egress_socket: str | None) -> tuple[list[str], list[str]]:
    """Still only loopback, but the run's egress proxy is bound in as a Unix socket and the
    relay (_forward.py) starts before the script: it listens on 127.0.0.1:PROXY_PORT, which
    PROXY_ENV names. The CA bundle is public and lets HTTPS clients check certificates."""
    if egress_socket is None or files.forwarder is None:
        raise ValueError("a run that may reach the network needs its egress proxy")
    args = ["--ro-bind", egress_socket, EGRESS_SOCKET,
            "--perms", "0444", "--ro-bind-data", str(files.forwarder), FORWARDER_PATH]
    if os.path.isfile(CA_BUNDLE):
        args += ["--ro-bind", CA_BUNDLE, CA_BUNDLE]
    return args, [INTERPRETERS[Language.PYTHON][0], "-I", "-S", "-B", FORWARDER_PATH, str(PROXY_PORT),
                  EGRESS_SOCKET, "--"]


# Each network mode: the bwrap arguments and the program that goes before the interpreter.
# A mode missing here is refused before anything starts (runner.validate).
NETWORKS = {Network.NONE: _no_network, Network.HTTP: _http_proxy}


def env_args(script: Script) -> bytes:
    """The script's environment as bwrap arguments, NUL-separated for `--args FD`: a job's
    variables may be secrets, and a command line is readable by every user of the host."""
    args = []
    for name, value in environment(script).items():
        args += ["--setenv", name, value]
    return b"".join(arg.encode() + b"\0" for arg in args)


def _runtime_args() -> list[str]:
    args: list[str] = []
    for path in RUNTIME_DIRS:
        if os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in ROOT_LINKS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    for path in RUNTIME_FILES:
        if os.path.exists(path):
            args += ["--ro-bind", path, path]
    return args
