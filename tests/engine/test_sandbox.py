"""The script sandbox: results come back right, bad scripts and unusable hosts are refused."""

from __future__ import annotations

import os
import sys
import uuid

import pytest

from cronsvc.sandbox import (
    MAX_SCRIPT_BYTES, Language, Limits, Sandbox, SandboxUnavailable, Script, ScriptRejected,
)
from tests.support.sandbox import PY, SH, box, run  # noqa: F401  (box is a fixture)


def test_python_stdout_and_exit_code(box):
    result = run(box, PY, """
        import sys
        print("answer", 6 * 7)
        print("to stderr", file=sys.stderr)
    """)
    assert (result.exit_code, result.reason, result.ok) == (0, None, True)
    assert result.stdout == b"answer 42\n"
    assert result.stderr == b"to stderr\n"
    assert not result.stdout_truncated and not result.stderr_truncated


def test_shell_stdout_and_exit_code(box):
    result = run(box, SH, """
        set -e
        for word in one two; do echo "$word"; done
        echo oops >&2
    """)
    assert (result.exit_code, result.stdout, result.stderr) == (0, b"one\ntwo\n", b"oops\n")


@pytest.mark.parametrize("language, source", [
    (PY, "import sys; print('partial'); sys.exit(3)"),
    (SH, "echo partial; exit 3"),
])
def test_non_zero_exit_is_reported(box, language, source):
    result = run(box, language, source)
    assert (result.exit_code, result.signal, result.reason) == (3, None, None)
    assert not result.ok
    assert result.stdout == b"partial\n"


def test_python_exception_is_a_failure_with_its_traceback(box):
    result = run(box, PY, "raise ValueError('broken job')")
    assert result.exit_code == 1
    assert b"ValueError: broken job" in result.stderr


def test_a_script_killed_by_a_signal_reports_it(box):
    result = run(box, SH, "kill -TERM $$")
    assert (result.exit_code, result.signal) == (128 + 15, 15)


def test_the_job_environment_reaches_the_script_but_not_over_the_base(box):
    result = run(box, SH, 'echo "$GREETING|$PATH|$HOME"', env={"GREETING": "hello",
                                                               "PATH": "/elsewhere"})
    assert result.stdout == b"hello|/usr/bin:/bin|/tmp\n"


def test_the_script_runs_as_an_unprivileged_user_without_capabilities(box):
    result = run(box, SH, "id -u; grep -E '^Cap(Eff|Prm|Bnd):' /proc/self/status")
    lines = result.stdout.decode().split("\n")
    assert lines[0] == "1000"
    assert all(line.split()[1] == "0000000000000000" for line in lines[1:4]), lines


def test_a_script_of_the_largest_size_runs_and_a_larger_one_is_refused(box):
    comment = b"# padding\n"
    body = b"echo fits\n"
    fits = body + comment * ((MAX_SCRIPT_BYTES - len(body)) // len(comment))
    assert box.run(Script(SH, fits.ljust(MAX_SCRIPT_BYTES, b"#"))).stdout == b"fits\n"
    with pytest.raises(ScriptRejected) as refused:
        box.run(Script(SH, b"#" * (MAX_SCRIPT_BYTES + 1)))
    assert refused.value.code == "script_too_large"


@pytest.mark.parametrize("env", [
    {"BAD NAME": "x"}, {"1X": "x"}, {"OK": "nul\0byte"},
    {f"V{i}": "x" for i in range(101)}, {"BIG": "x" * (32 * 1024)},
])
def test_bad_environment_variables_are_refused(box, env):
    with pytest.raises(ScriptRejected) as refused:
        box.run(Script(SH, b"true", env=env))
    assert refused.value.code == "script_env"


def test_limits_must_be_positive():
    with pytest.raises(ValueError):
        Limits(wall_seconds=0)


def _marker_script(path: str) -> Script:
    # Unsandboxed, this would create `path` on the host.
    return Script(Language.SHELL, f"touch {path}; echo ran".encode())


@pytest.mark.parametrize("bwrap", ["/nonexistent/bwrap", "/usr/bin/false"])
def test_a_host_that_cannot_sandbox_refuses_to_run(tmp_path, bwrap):
    refused = Sandbox(bwrap=bwrap)
    status = refused.available()
    assert not status.ok
    assert status.reason
    marker = tmp_path / f"ran-{uuid.uuid4().hex}"
    with pytest.raises(SandboxUnavailable) as error:
        refused.run(_marker_script(str(marker)))
    assert error.value.code == "sandbox_unavailable"
    assert "cannot run on this host" in error.value.message
    assert not marker.exists()


def test_a_missing_bwrap_is_named_with_the_package_to_install():
    status = Sandbox(bwrap="/nonexistent/bwrap").available()
    assert "bubblewrap" in status.reason and "/nonexistent/bwrap" in status.reason


def test_this_host_can_sandbox():
    status = Sandbox().available()
    assert status.ok, status.reason
    assert os.path.exists(Sandbox().bwrap)


def test_a_network_mode_the_sandbox_does_not_know_is_refused(box):
    with pytest.raises(ScriptRejected) as refused:
        box.run(Script(SH, b"true", network="http"))
    assert refused.value.code == "script_network"


def test_the_script_runs_under_seccomp_with_no_new_privileges(box):
    result = run(box, SH, "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status")
    assert result.stdout == b"NoNewPrivs:\t1\nSeccomp:\t2\n"  # 2: a filter is loaded


def test_a_host_without_libseccomp_refuses_to_run(monkeypatch, tmp_path):
    from cronsvc.sandbox import seccomp

    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # the import fails
    seccomp.filter_program.cache_clear()
    try:
        refused = Sandbox()
        assert "libseccomp" in refused.available().reason
        marker = tmp_path / "ran"
        with pytest.raises(SandboxUnavailable):
            refused.run(_marker_script(str(marker)))
        assert not marker.exists()
    finally:
        seccomp.filter_program.cache_clear()
