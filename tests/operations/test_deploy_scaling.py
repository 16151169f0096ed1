"""docs/deploy.md's scaling line, exactly as written there, handed to honcho on the real
Procfile: three schedulers, two worker_pro, no release, one of every other line. honcho's
`export` expands the counts with the same parser and expander as `start`, without starting
the processes."""

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from tests.support.deploy import ROOT
from tests.operations.test_server_mode import procfile_names

SCALING_LINE = re.compile(r"^\s*honcho start -c (\S+)\s*$", re.M)


def test_the_documented_scaling_line_runs_three_schedulers_and_two_pro_workers(tmp_path):
    (counts,) = [c for c in SCALING_LINE.findall((ROOT / "docs" / "deploy.md").read_text()) if "scheduler=" in c]
    assert counts == "release=0,scheduler=3,worker_pro=2"
    units = _exported(tmp_path, "-c", counts)
    expected = {name: 1 for name in procfile_names() - {"release"}}
    assert units == Counter({**expected, "scheduler": 3, "worker_pro": 2})


def test_a_second_c_replaces_the_first(tmp_path):
    """Why docs/deploy.md puts every count in one -c: with two, honcho keeps the last, and the
    release runs again beside the three schedulers."""
    exported = _exported(tmp_path, "-c", "release=0", "-c", "scheduler=3")
    assert exported["release"] == 1 and exported["scheduler"] == 3


def _exported(tmp_path, *counts):
    """{process type: how many} honcho would run of the real Procfile with ``counts``."""
    honcho = Path(sys.executable).with_name("honcho")
    subprocess.run([str(honcho), "export", "-f", str(ROOT / "Procfile"), "-d", str(ROOT), "-e", "/dev/null",
                    "-a", "cronsvc", *counts, "systemd", str(tmp_path / "units")],
                   check=True, capture_output=True, text=True)
    return Counter(re.fullmatch(r"cronsvc-(\w+)-\d+\.service", unit.name).group(1)
                   for unit in (tmp_path / "units").glob("cronsvc-*-*.service"))
