"""The model of a run's life (docs/model/run_life.pml) checked exhaustively by spin within
its stated bounds: no invariant broken and the whole state space searched; and the model
is not vacuous: without the lease token's check in the recording statement, with due-ness
decided by a process's clock, or without the sweeper's take-back, spin finds the violation
of the invariant each one breaks. Needs Debian's ``spin`` and gcc (``make model-checker``,
which ``make test`` runs)."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

MODEL = Path(__file__).resolve().parents[2] / "docs" / "model" / "run_life.pml"
#: The two configurations whose bounds the model's header and docs/architecture.md state.
EVERY_FAULT = ()
TWO_RUNS = ("-DNR=2", "-DMAXATT=1", "-DMAXRECLAIM=0", "-DMAXDUP=0", "-DMAXCRASH=0")


def verify(tmp_path, *defines, optimize="-O1"):
    """spin -a, gcc, pan: pan's report and, when it found a violation, the failed assertion.
    (-O1: gcc's -O2 takes longer to compile pan.c than pan takes to search; a search that
    stops at its first violation is fastest unoptimised.)"""
    missing = [tool for tool in ("spin", "gcc") if shutil.which(tool) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} not installed: run `make model-checker`")
    shutil.copy(MODEL, tmp_path / MODEL.name)
    subprocess.run(["spin", "-a", *defines, MODEL.name], cwd=tmp_path, check=True, capture_output=True)
    subprocess.run(["gcc", optimize, "-w", "-DSAFETY", "-o", "pan", "pan.c"], cwd=tmp_path, check=True, capture_output=True)
    report = subprocess.run(["./pan", "-m100000"], cwd=tmp_path, capture_output=True, text=True, timeout=300).stdout
    failed = ""
    if (tmp_path / f"{MODEL.name}.trail").exists():
        replay = subprocess.run(["spin", "-t", *defines, MODEL.name], cwd=tmp_path, capture_output=True, text=True)
        failed = "\n".join(line for line in replay.stdout.splitlines() if "failed assertion" in line)
    return report, failed


def errors(report):
    return int(re.search(r"errors: (\d+)", report).group(1))


@pytest.mark.parametrize("defines", [EVERY_FAULT, TWO_RUNS, ("-DSCHEDULER_SKEW",)],
                         ids=["every-fault", "two-runs", "scheduler-clock-ahead"])
def test_the_invariants_hold_in_every_reachable_state(tmp_path, defines):
    report, failed = verify(tmp_path, *defines)
    assert errors(report) == 0, failed or report
    assert "Search not completed" not in report
    assert "max search depth too small" not in report
    assert "invalid end states\t+" in report  # the deadlock and quiescence checks were on
    assert int(re.search(r"(\d+) states, stored", report).group(1)) > 100_000


@pytest.mark.parametrize("switch, invariant", [
    # I2: the recording UPDATE guarded by status = 'running' alone lets a superseded
    # worker's result land on the run the worker that took it over holds.
    ("-DNO_TOKEN_CHECK", "assert((holder[r]==w))"),
    # I3: a scheduler and a worker whose clocks run ahead fire a run before it is due.
    ("-DPROCESS_CLOCK", "<=now))"),
    # I4: without the sweeper's take-back a dead worker's run stays running for ever.
    ("-DNO_TAKE_BACK", "(status[0]==3)"),
])
def test_the_model_catches_a_broken_rule(tmp_path, switch, invariant):
    report, failed = verify(tmp_path, switch, optimize="-O0")
    assert errors(report) >= 1, report
    assert invariant in failed, failed
