"""The client is a package of its own: `pip install ./client` into a fresh virtualenv (no
Django, no server code) gives a working `cronsvc` command."""

import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from tests.client.conftest import Cli
from tests.support.processes import ROOT

CLIENT = ROOT / "client"


def _pins():
    """``name -> version`` pinned in requirements/base.txt and dev.txt."""
    pins = {}
    for name in ("base.txt", "dev.txt"):
        for line in (ROOT / "requirements" / name).read_text().splitlines():
            match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)", line)
            if match:
                pins[match[1].lower()] = match[2]
    return pins


def test_the_declared_dependencies_start_at_the_versions_the_tests_run():
    declared = tomllib.loads((CLIENT / "pyproject.toml").read_text())["project"]["dependencies"]
    pins = _pins()
    for requirement in declared:
        name, lower, upper = re.fullmatch(r"([a-z0-9_-]+)>=([^,]+),<(\d+)", requirement).groups()
        assert pins[name] == lower, f"{name}: pyproject says >={lower}, requirements pin {pins[name]}"
        assert int(upper) == int(lower.split(".")[0]) + 1  # up to the next major version


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_pip_installs_the_client_alone_and_its_command_works(tmp_path, web, client_tenant, cronsvc_home):
    source = tmp_path / "client"  # a copy: the build leaves build/ and *.egg-info beside the sources
    shutil.copytree(CLIENT, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    venv = tmp_path / "venv"
    # The venv gets no pip of its own (ensurepip is the slow part); this one installs into it.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True, timeout=120)
    install = subprocess.run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--quiet",
                              source], capture_output=True, text=True, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]

    imports = subprocess.run([venv / "bin" / "python", "-c", (
        "import sys, cronsvc_client, cronsvc_client.cli\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'rest_framework', 'apps', 'cronsvc'}))\n"
        "import django")], capture_output=True, text=True, timeout=60)
    assert imports.stdout.strip() == "[]"  # nothing of the server's is loaded...
    assert "No module named 'django'" in imports.stderr  # ...nor even installed

    cronsvc = Cli(cronsvc_home, web.base_url, client_tenant.full_api_key, executable=venv / "bin" / "cronsvc")
    assert "jobs" in cronsvc.ok("--help").out
    created = cronsvc.ok("jobs", "create", "--name", "from a fresh venv", "--every", "3600",
                         "--url", "https://example.com/", "-o", "json")
    assert [job["id"] for job in cronsvc.ok("jobs", "list", "-o", "json")] == [created["id"]]
