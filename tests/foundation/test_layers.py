"""The layers hold (.importlinter, docs/architecture.md "Layers"): lint-imports passes on
this tree, and it does see an import against the layers."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(*args):
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", *args], cwd=ROOT, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}, timeout=300)


def _contract(name):
    """The section of .importlinter that holds contract ``name``."""
    config = (ROOT / ".importlinter").read_text()
    start = config.index(f"[importlinter:contract:{name}]")
    end = config.find("\n[", start)
    return config[start:] if end == -1 else config[start:end + 1]


def test_the_layers_are_kept():
    result = lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 4 kept, 0 broken." in result.stdout


def test_no_import_is_exempted_from_the_layers():
    config = (ROOT / ".importlinter").read_text()
    assert "ignore_imports" not in config, "a known-debt list is back in .importlinter"


def test_an_import_against_the_layers_breaks_the_contract(tmp_path):
    config = (ROOT / ".importlinter").read_text()
    # apps.api authenticates with accounts' keys: with accounts put above it, that import
    # goes against the layers and the contract must say so.
    layers = "    apps.api | apps.eventstream\n    apps.accounts\n"
    assert layers in config
    flipped = config.replace(layers, "    apps.accounts\n    apps.api | apps.eventstream\n")
    (tmp_path / "flipped.ini").write_text(flipped)
    result = lint_imports("--config", str(tmp_path / "flipped.ini"))
    assert result.returncode == 1
    assert "Apps import only the layers below them BROKEN" in result.stdout
    assert "apps.api.authentication -> apps.accounts" in result.stdout, result.stdout


def test_history_importing_the_worker_breaks_its_contract(tmp_path):
    """The executions rooms (docs/architecture.md): a history module reaching into the
    worker, directly or through another module, is reported."""
    package = tmp_path / "apps"
    (package / "executions" / "history").mkdir(parents=True)
    (package / "executions" / "worker").mkdir()
    for init in ("", "executions/", "executions/history/", "executions/worker/"):
        (package / init / "__init__.py").write_text("")
    (package / "executions" / "go_between.py").write_text("from apps.executions.worker import batch\n")
    (package / "executions" / "worker" / "batch.py").write_text("")
    (package / "executions" / "history" / "api.py").write_text("from apps.executions import go_between\n")
    contract = _contract("history-not-worker")
    (tmp_path / "rooms.ini").write_text(f"[importlinter]\nroot_packages =\n    apps\n\n{contract}")
    result = subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(tmp_path / "rooms.ini")],
                            cwd=tmp_path, capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "apps.executions.history.api -> apps.executions.go_between" in result.stdout, result.stdout


def test_an_app_importing_config_breaks_its_contract(tmp_path):
    """The project (config: settings, the Celery app, URLs) sits above every app: an app
    module importing it is reported."""
    (tmp_path / "apps" / "executions").mkdir(parents=True)
    (tmp_path / "config").mkdir()
    for init in ("apps/", "apps/executions/", "config/"):
        (tmp_path / init / "__init__.py").write_text("")
    (tmp_path / "config" / "celery.py").write_text("app = None\n")
    (tmp_path / "apps" / "executions" / "publishing.py").write_text("from config.celery import app\n")
    contract = _contract("apps-not-config")
    (tmp_path / "project.ini").write_text(
        f"[importlinter]\nroot_packages =\n    apps\ninclude_external_packages = True\n\n{contract}")
    result = subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config", str(tmp_path / "project.ini")],
                            cwd=tmp_path, capture_output=True, text=True,
                            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path)}, timeout=300)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "apps.executions.publishing -> config" in result.stdout, result.stdout
