"""Helpers for the script sandbox's tests: run a script, find a run's processes on the host."""

from __future__ import annotations

import os
import secrets
import textwrap
import time

import pytest

from cronsvc.sandbox import Language, Limits, Network, Sandbox, Script
from cronsvc.sandbox.runner import HOST_UIDS

PY, SH = Language.PYTHON, Language.SHELL


def pinned_sandbox() -> Sandbox:
    """A sandbox whose runs all get one known host user id, so the host side of a test can
    find (or fail to find) the run's processes. Requires root, like the rest of these tests'
    process checks; refuses to run on a host that cannot sandbox."""
    uid = HOST_UIDS.start + secrets.randbelow(len(HOST_UIDS))
    box = Sandbox(host_uids=range(uid, uid + 1))
    status = box.available()
    assert status.ok, f"the sandbox must work on this host (make sandbox): {status.reason}"
    return box


@pytest.fixture
def box() -> Sandbox:
    return pinned_sandbox()


def run(box: Sandbox, language: Language, source: str, env=None, egress=None, **limits):
    """`egress` (EgressRules): the run may reach the network through its proxy."""
    network = Network.NONE if egress is None else Network.HTTP
    script = Script(language, textwrap.dedent(source).encode(), env=env or {}, network=network)
    return box.run(script, Limits(**limits), egress)


def host_uid(box: Sandbox) -> int:
    return box.host_uids.start


def live_processes(uid: int) -> list[int]:
    """Host pids of processes (zombies aside) whose real user id is `uid`."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as status:
                fields = dict(line.split(":", 1) for line in status if ":" in line)
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith("Z"):
            found.append(int(name))
    return found


def processes_after(uid: int, within: float = 10.0) -> list[int]:
    """The run's processes still alive once they had `within` seconds to go (killed
    processes take a moment to be reaped)."""
    end = time.monotonic() + within
    while (left := live_processes(uid)) and time.monotonic() < end:
        time.sleep(0.05)
    return left


def wait_for(predicate, within: float = 20.0):
    end = time.monotonic() + within
    while time.monotonic() < end:
        if value := predicate():
            return value
        time.sleep(0.02)
    raise AssertionError("condition not met in time")
