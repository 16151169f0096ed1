"""Escapes from the script sandbox fail: the host's files, /proc, network, another run,
the kernel interfaces the seccomp filter removes."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
import uuid
from pathlib import Path

import pytest

from tests.support.sandbox import (  # noqa: F401  (box is a fixture)
    PY, SH, box, host_uid, live_processes, pinned_sandbox, run, wait_for,
)

REPO = Path(__file__).resolve().parents[2]

PROBE_FILES = """
import json, os
found = {}
for path in PATHS:
    try:
        if os.path.isdir(path):
            found[path] = os.listdir(path)
        else:
            with open(path, "rb") as f:
                found[path] = f.read(64).decode(errors="replace")
    except OSError as e:
        pass
print(json.dumps(found))
"""


def probe_files(box, paths):
    result = run(box, PY, f"PATHS = {list(paths)!r}\n" + PROBE_FILES)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_the_hosts_secret_and_private_files_cannot_be_read(box):
    paths = ["/etc/shadow", "/etc/passwd", "/etc/ssh", "/root", "/home", "/var", "/srv",
             "/usr/local", "/usr/share", "/opt", "/work", str(REPO), str(REPO / "manage.py"),
             str(Path(__file__).resolve()), "/proc/1/root/etc/shadow"]
    assert [p for p in paths if os.path.exists(p)], "the host has none of these to protect"
    found = probe_files(box, paths)
    # /etc/passwd exists inside, but it is the sandbox's own two-line file.
    assert found.pop("/etc/passwd").startswith("sandbox:x:1000:1000:")
    assert found == {}


def test_the_root_holds_only_the_runtime(box):
    found = probe_files(box, ["/", "/etc", "/usr"])
    assert sorted(found["/"]) == ["bin", "dev", "etc", "lib", "lib64", "proc", "sandbox",
                                  "sbin", "tmp", "usr"]
    assert sorted(found["/etc"]) == ["group", "hosts", "ld.so.cache", "passwd"]
    assert sorted(found["/usr"]) == ["bin", "lib", "lib64"]


@pytest.mark.parametrize("target", ["/newfile", "/usr/bin/evil", "/etc/passwd",
                                    "/sandbox/script", "/usr/lib/evil.so"])
def test_nothing_outside_tmp_is_writable(box, target):
    result = run(box, SH, f"echo x > {target} && echo WROTE")
    assert result.stdout == b""
    assert result.exit_code != 0


def test_tmp_is_the_only_writable_place(box):
    """/dev included: bwrap's /dev is a tmpfs without a size cap (a way to fill the host's
    memory) unless it is made read-only."""
    result = run(box, PY, """
        import os
        points = {line.split()[4] for line in open("/proc/self/mountinfo")}
        places = {p for p in points | {"/dev/shm", "/dev/mqueue"} if os.path.isdir(p)}
        writable = []
        for place in sorted(places):
            try:
                open(os.path.join(place, "probe"), "wb").close()
                writable.append(place)
            except OSError:
                pass
        print(writable, "/dev" in places)
    """)
    assert result.stdout == b"['/tmp'] True\n", result.stderr


def test_the_hosts_processes_are_not_visible(box, monkeypatch):
    secret = f"host-secret-{uuid.uuid4().hex}"
    monkeypatch.setenv("CRONSVC_TEST_SECRET", secret)
    result = run(box, PY, """
        import os
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
        print(len(pids))
        for pid in pids:
            for name in ("environ", "cmdline"):
                try:
                    print(open(f"/proc/{pid}/{name}", "rb").read().decode(errors="replace"))
                except OSError:
                    pass
        print(os.environ)
    """)
    assert result.exit_code == 0, result.stderr
    assert int(result.stdout.split(b"\n")[0]) <= 3  # bwrap's init, the script and nothing else
    assert secret.encode() not in result.stdout
    assert str(os.getpid()).encode() + b"\n" not in result.stdout.split(b"\n", 1)[1]


def test_only_loopback_exists_and_the_hosts_services_cannot_be_reached(box):
    with socket.create_connection(("127.0.0.1", 5432), timeout=5):
        pass  # PostgreSQL does listen on the host's loopback: the sandbox must not see it
    result = run(box, PY, """
        import socket
        for host, port in [("127.0.0.1", 5432), ("127.0.0.1", 6379), ("1.1.1.1", 80),
                           ("8.8.8.8", 53), ("::1", 5432)]:
            try:
                socket.create_connection((host, port), timeout=3).close()
                print("CONNECTED", host, port)
            except OSError as e:
                print("refused", host, port, e.errno)
        print(sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:]))
    """)
    assert result.exit_code == 0, result.stderr
    assert b"CONNECTED" not in result.stdout
    assert result.stdout.count(b"refused") == 5
    assert result.stdout.strip().endswith(b"['lo']")


def test_names_do_not_resolve(box):
    result = run(box, PY, """
        import socket
        try:
            print(socket.getaddrinfo("example.com", 443))
        except OSError as e:
            print("no resolution")
    """)
    assert result.stdout == b"no resolution\n"


def test_two_concurrent_runs_cannot_see_each_others_files_environment_or_processes():
    first, second = pinned_sandbox(), pinned_sandbox()
    secret = f"first-run-secret-{uuid.uuid4().hex}"
    outcome = {}
    first_run = threading.Thread(target=lambda: outcome.update(first=run(first, PY, f"""
        import signal, sys, time
        signal.signal(signal.SIGUSR1, lambda *_: sys.exit(0))  # the host's "done"
        open("/tmp/secret.txt", "w").write({secret!r})
        print("secret in own environment:", {secret!r} in open("/proc/self/environ").read())
        while True:
            time.sleep(1)
    """, env={"SECRET": secret}, wall_seconds=60)))
    first_run.start()
    try:
        # The host (root) sees into the first run's /tmp through its process's root.
        first_pid = wait_for(lambda: _script_pid(host_uid(first), "/tmp/secret.txt"))
        result = run(second, PY, """
            import os
            print(os.listdir("/tmp"))
            for pid in os.listdir("/proc"):
                if pid.isdigit():
                    for name in ("environ", "cmdline", "root/tmp/secret.txt"):
                        try:
                            print(open(f"/proc/{pid}/{name}", "rb").read())
                        except OSError:
                            pass
        """)
    finally:
        os.kill(first_pid, signal.SIGUSR1)
        first_run.join(60)
    assert outcome["first"].stdout == b"secret in own environment: True\n"
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(b"[]\n")
    assert secret.encode() not in result.stdout


def test_a_jobs_environment_is_on_no_command_line_of_the_host(box):
    """Any user of the host can read every process's command line."""
    secret = f"api-token-{uuid.uuid4().hex}"
    outcome = {}
    running = threading.Thread(target=lambda: outcome.update(result=run(box, PY, """
        import os, signal, sys, time
        signal.signal(signal.SIGUSR1, lambda *_: sys.exit(0))
        open("/tmp/started", "w").close()
        print(os.environ["TOKEN"])
        while True:
            time.sleep(1)
    """, env={"TOKEN": secret}, wall_seconds=60)))
    running.start()
    pid = wait_for(lambda: _script_pid(host_uid(box), "/tmp/started"))
    try:
        lines = [Path(f"/proc/{p}/cmdline").read_bytes() for p in live_processes(host_uid(box))]
    finally:
        os.kill(pid, signal.SIGUSR1)
        running.join(60)
    assert len(lines) >= 3  # bwrap outside, bwrap's init, the script
    assert not any(secret.encode() in line for line in lines)
    assert outcome["result"].stdout == secret.encode() + b"\n"  # it did reach the script


def _script_pid(uid: int, inner_path: str) -> int | None:
    for pid in live_processes(uid):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"/usr/bin/python3") and \
                    os.path.exists(f"/proc/{pid}/root{inner_path}"):
                return pid
        except OSError:
            continue
    return None


SYSCALL = """
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
def call(number, *args):
    ctypes.set_errno(0)
    result = libc.syscall(number, *[ctypes.c_long(a) for a in args])
    return "ok" if result >= 0 else errno.errorcode[ctypes.get_errno()]
"""


@pytest.mark.parametrize("name, call", [
    # x86_64 numbers: unshare(CLONE_NEWUSER) would otherwise succeed in a user namespace.
    ("unshare", "call(272, 0x10000000)"),
    ("ptrace", "call(101, 0, 0, 0, 0)"),  # PTRACE_TRACEME
    ("keyctl", "call(250, 0, -3, 0)"),  # KEYCTL_GET_KEYRING_ID of the session keyring
    ("bpf", "call(321, 0, 0, 0)"),
    ("perf_event_open", "call(298, 0, 0, -1, -1, 0)"),
    ("userfaultfd", "call(323, 1)"),  # UFFD_USER_MODE_ONLY: allowed unprivileged
    ("io_uring_setup", "call(425, 1, 0)"),
    ("mount", "call(165, 0, 0, 0, 0, 0)"),
    ("setns", "call(308, 0, 0)"),
    ("clone with CLONE_NEWUSER", "call(56, 0x10000000 | 17, 0, 0, 0, 0)"),
])
def test_the_seccomp_filter_denies(box, name, call):
    if os.uname().machine != "x86_64":
        pytest.skip("syscall numbers are x86_64's")
    result = run(box, PY, SYSCALL + f"print({call})")
    assert result.stdout == b"EPERM\n", (name, result.stdout, result.stderr)


def test_ordinary_processes_still_work_under_the_filter(box):
    result = run(box, SH, "echo $(echo nested) | tr a-z A-Z; ls / >/dev/null && echo listed")
    assert result.stdout == b"NESTED\nlisted\n"


def test_threads_and_subprocesses_work_under_the_filter(box):
    result = run(box, PY, """
        import subprocess, threading
        seen = []
        thread = threading.Thread(target=lambda: seen.append("thread"))
        thread.start()
        thread.join()
        print(seen, subprocess.run(["echo", "child"], capture_output=True).stdout)
    """)
    assert result.stdout == b"['thread'] b'child\\n'\n", result.stderr


def test_no_descriptor_of_the_worker_or_of_bwrap_reaches_the_script(box):
    """bwrap's status pipe among them: a script that could write to it could forge its own
    exit code."""
    keep = [os.open("/dev/null", os.O_RDONLY) for _ in range(50)]
    try:
        result = run(box, PY, "import os; print(sorted(os.listdir('/proc/self/fd')))")
    finally:
        for fd in keep:
            os.close(fd)
    assert result.stdout == b"['0', '1', '2', '3']\n"  # 3: listdir's own
