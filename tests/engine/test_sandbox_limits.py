"""The script sandbox's limits hold and say which was hit: wall time (the whole tree dies),
CPU time, memory, processes (fork bombs), disk (/tmp) and output."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from cronsvc.sandbox import Limits, Reason, cgroup
from cronsvc.sandbox.runner import classify
from tests.support.sandbox import (  # noqa: F401  (box is a fixture)
    PY, SH, box, host_uid, live_processes, processes_after, run, wait_for,
)

REPO = Path(__file__).resolve().parents[2]


def test_a_run_past_its_wall_time_is_killed(box):
    result = run(box, PY, """
        import time
        print("started")
        time.sleep(600)
        print("never")
    """, wall_seconds=1)
    assert (result.reason, result.exit_code) == (Reason.TIMEOUT, None)
    assert result.stdout == b"started\n"  # what came before the kill is kept
    assert processes_after(host_uid(box)) == []


def test_a_double_forked_daemon_dies_with_the_run_at_the_deadline(box):
    result = run(box, SH, """
        ( setsid sh -c 'trap "" HUP TERM; sleep 600' & )
        ( sleep 600 & )
        echo spawned
        sleep 600
    """, wall_seconds=1)
    assert result.reason is Reason.TIMEOUT
    assert result.stdout == b"spawned\n"
    assert processes_after(host_uid(box)) == []


def test_a_daemon_left_behind_by_a_finished_script_is_killed(box):
    result = run(box, SH, """
        ( setsid sh -c 'exec >/dev/null 2>&1; sleep 600' & )
        echo done
    """, wall_seconds=30)
    assert (result.exit_code, result.reason, result.stdout) == (0, None, b"done\n")
    assert processes_after(host_uid(box)) == []


def test_a_script_that_closes_its_output_still_meets_the_deadline(box):
    result = run(box, SH, "exec >&- 2>&-; sleep 600", wall_seconds=1)
    assert result.reason is Reason.TIMEOUT
    assert processes_after(host_uid(box)) == []


WORKER = """
import sys
from cronsvc.sandbox import Language, Limits, Sandbox, Script
uid = int(sys.argv[1])
Sandbox(host_uids=range(uid, uid + 1)).run(Script(Language.SHELL, b"echo up; sleep 600"),
                                           Limits(wall_seconds=600))
"""


def test_a_run_dies_with_the_worker_that_started_it(box):
    uid = host_uid(box)
    worker = subprocess.Popen([sys.executable, "-c", WORKER, str(uid)], cwd=REPO)
    try:
        wait_for(lambda: len(live_processes(uid)) >= 3)  # bwrap, its init and the script
    finally:
        worker.kill()
        worker.wait()
    assert processes_after(uid) == []


def test_cpu_time_is_limited(box):
    result = run(box, PY, "while True: pass", cpu_seconds=1, wall_seconds=60)
    assert result.reason is Reason.CPU
    # the process's own RLIMIT_CPU (SIGXCPU, then SIGKILL), or, when the run's cgroup
    # account is read first, the whole run killed at its CPU limit (no exit code)
    assert result.signal in (signal.SIGXCPU, signal.SIGKILL) or result.exit_code is None
    # ~1 s: the rlimit counts in scheduler ticks, and on a loaded machine the accounting we
    # read lags it (0.79-0.88 s seen at load 12); far below would mean a limit hit early.
    assert 0.5 <= result.cpu_seconds < 5


def test_filling_memory_is_stopped(box):
    result = run(box, PY, """
        chunks = []
        while True:
            chunks.append(bytearray(16 * 1024 * 1024))
    """, memory_bytes=128 * 1024 * 1024)
    assert result.reason is Reason.MEMORY
    assert result.exit_code == 1
    assert b"MemoryError" in result.stderr


def test_one_big_allocation_is_refused(box):
    result = run(box, PY, "x = bytearray(1024 ** 3)", memory_bytes=128 * 1024 * 1024)
    assert result.reason is Reason.MEMORY


def test_a_fork_bomb_is_contained(box):
    result = run(box, SH, "bomb() { bomb | bomb & }; bomb; sleep 600", max_processes=16,
                 wall_seconds=5)
    assert result.reason in (Reason.PIDS, Reason.TIMEOUT)
    assert processes_after(host_uid(box)) == []
    assert subprocess.run(["true"]).returncode == 0  # the host can still start processes


def test_forks_past_the_process_limit_are_refused(box):
    result = run(box, PY, """
        import os, time
        started = 0
        try:
            while True:
                if os.fork() == 0:
                    time.sleep(600)
                    os._exit(0)
                started += 1
        finally:
            print(started)
    """, max_processes=10, wall_seconds=30)
    assert result.reason is Reason.PIDS
    assert int(result.stdout) < 10  # the script itself is one of the ten
    assert b"BlockingIOError" in result.stderr
    assert processes_after(host_uid(box)) == []


def test_filling_the_disk_stops_at_the_tmp_cap(box):
    result = run(box, PY, """
        import os
        written = 0
        try:
            with open("/tmp/fill", "wb") as f:
                while True:
                    f.write(b"x" * 65536)
                    f.flush()
                    written += 65536
        except OSError as e:
            print(e.errno, written)
    """, tmp_bytes=1024 * 1024)
    errno_, written = map(int, result.stdout.split())
    assert errno_ == 28  # ENOSPC
    assert written <= 1024 * 1024


def test_output_floods_are_capped_and_flagged(box):
    result = run(box, PY, """
        import sys
        sys.stdout.write("o" * 5_000_000)
        sys.stderr.write("e" * 5_000_000)
    """, output_bytes=1000)
    assert (result.exit_code, result.reason) == (0, Reason.OUTPUT)
    assert (result.stdout, result.stderr) == (b"o" * 1000, b"e" * 1000)
    assert result.stdout_truncated and result.stderr_truncated


def test_output_at_the_cap_is_not_truncated(box):
    result = run(box, SH, "printf '%1000s' x", output_bytes=1000)
    assert (len(result.stdout), result.stdout_truncated, result.reason) == (1000, False, None)


def test_the_most_decisive_reason_wins():
    limits = Limits(cpu_seconds=5)
    base = dict(exit_code=1, signal=None, stderr=b"MemoryError\n", cpu_seconds=0.1,
                stdout_truncated=True, stderr_truncated=False)
    assert classify(limits, True, **base) is Reason.TIMEOUT
    assert classify(limits, False, **base) is Reason.MEMORY
    assert classify(limits, False, **{**base, "signal": 24}) is Reason.CPU
    assert classify(limits, False, **{**base, "stderr": b"Cannot fork\n"}) is Reason.PIDS
    assert classify(limits, False, **{**base, "stderr": b""}) is Reason.OUTPUT
    # A script that prints the words and succeeds hit no limit.
    assert classify(limits, False, **{**base, "exit_code": 0, "stdout_truncated": False}) \
        is None


# With a cgroup per run (on hosts that allow one: cgroup.detect), the tree is held together.

def _cgroups(box):
    if box.available().cgroups == "none":
        pytest.skip("this host gives the worker no cgroups to make (rlimits only)")


@pytest.fixture
def made_cgroups(monkeypatch):
    made = []
    original = cgroup.RunCgroup.__init__

    def record(self, *args):
        original(self, *args)
        made.append(self)

    monkeypatch.setattr(cgroup.RunCgroup, "__init__", record)
    return made


def test_the_processes_of_a_run_share_one_memory_limit(box, made_cgroups):
    _cgroups(box)
    # Each child stays under the per-process limit; together they are far over it.
    result = run(box, PY, """
        import os, sys, time
        children = []
        for _ in range(6):
            pid = os.fork()
            if pid == 0:
                block = bytearray(b"\\1") * (64 * 1024 * 1024)
                time.sleep(3)
                os._exit(0)
            children.append(pid)
        statuses = [os.waitpid(pid, 0)[1] for pid in children]
        sys.exit(1 if any(os.WIFSIGNALED(s) for s in statuses) else 0)
    """, memory_bytes=128 * 1024 * 1024, max_processes=16)
    assert (result.exit_code, result.reason) == (1, Reason.MEMORY)  # no message to go by
    assert made_cgroups


def test_the_cgroup_says_the_process_limit_was_hit(box, made_cgroups):
    _cgroups(box)
    result = run(box, PY, """
        import os, sys, time
        try:
            for _ in range(8):
                if os.fork() == 0:
                    time.sleep(5)
                    os._exit(0)
        except OSError:
            sys.exit(9)  # quietly: no message to go by
    """, max_processes=4)
    assert (result.exit_code, result.stderr, result.reason) == (9, b"", Reason.PIDS)
    assert made_cgroups


def test_a_runs_cgroup_is_removed_after_it(box, made_cgroups):
    _cgroups(box)
    run(box, SH, "sleep 600", wall_seconds=1)
    run(box, SH, "true")
    assert len(made_cgroups) == 2
    assert not any(os.path.exists(path) for group in made_cgroups for path in group.dirs)


def test_cpu_time_is_the_whole_runs_not_bwraps(box, made_cgroups):
    """Busy children the script never waits for: bwrap's rusage saw ~0.03 s of them."""
    _cgroups(box)
    result = run(box, SH, """
        ( while :; do :; done ) &
        ( while :; do :; done ) &
        sleep 2
        echo done
    """, wall_seconds=10, cpu_seconds=30)
    assert (result.exit_code, result.reason) == (0, None)
    # ~4 s on two idle cores; well under that on a loaded machine, but never near bwrap's 0.03 s
    assert result.cpu_seconds >= 0.3, result.cpu_seconds


def test_many_processes_under_their_own_cpu_limit_still_meet_the_runs(box, made_cgroups):
    """Each busy loop stays under RLIMIT_CPU (per process); the run as a whole does not."""
    _cgroups(box)
    result = run(box, SH, """
        for i in 1 2 3 4; do ( while :; do :; done ) & done
        sleep 60
    """, wall_seconds=30, cpu_seconds=2)
    assert (result.reason, result.exit_code) == (Reason.CPU, None)
    assert 2 <= result.cpu_seconds < 10 and result.duration < 25
    assert made_cgroups[0].cpu is not None  # counted by the cgroup, not by each rlimit
    assert processes_after(host_uid(box)) == []


def test_an_oom_kill_inside_a_run_that_exits_0_is_recorded(box, made_cgroups):
    """The cgroup's OOM killer ends two children; the script ignores it and exits 0: the
    run still says its memory limit was hit."""
    _cgroups(box)
    result = run(box, PY, """
        import os, time
        for _ in range(4):
            if os.fork() == 0:
                block = bytearray(b"\\1") * (40 * 1024 * 1024)
                time.sleep(3)
                os._exit(0)
        for _ in range(4):
            print(os.wait()[1])
    """, memory_bytes=64 * 1024 * 1024, wall_seconds=20)
    assert result.exit_code == 0 and b"9" in result.stdout  # some child died of SIGKILL
    assert result.reason is Reason.MEMORY
