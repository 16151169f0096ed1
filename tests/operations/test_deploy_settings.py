"""The documented production environment (deploy/production.env.example) passes
`manage.py check --deploy --fail-level WARNING`, and the start-up refuses the example's
SECRET_KEY placeholder, and a weak key over https, loudly."""

import os
import re
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from config.secret_key import EXAMPLE_MARKER, is_weak

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "production.env.example"
LINE = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")


def example_lines():
    return EXAMPLE.read_text().splitlines()


def example_values():
    """The file's variables as docker compose's env_file reads them (KEY=value, # comments)."""
    values = {}
    for line in example_lines():
        if line.strip() and not line.startswith("#"):
            match = LINE.match(line)
            assert match, f"not KEY=value: {line!r}"
            values[match[1]] = match[2]
    return values


def own_values(**overrides):
    """The example as a self-hoster fills it in: their own SECRET_KEY, the rest as shown."""
    values = example_values()
    values["SECRET_KEY"] = secrets.token_urlsafe(50)
    values.update(overrides)
    return values


def manage(values, tmp_path, *args):
    """manage.py with only these variables (plus PATH), as a fresh process of a host has."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "VAR_DIR": str(tmp_path / "var"), **values}
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)


def test_check_deploy_is_clean_with_the_documented_production_settings(tmp_path):
    result = manage(own_values(), tmp_path, "check", "--deploy", "--fail-level", "WARNING")
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "System check identified no issues (0 silenced)." in result.stdout, output
    assert "WARNING" not in output and "security.W" not in output, output


def test_check_deploy_warns_without_them(tmp_path):
    """The test can fail: the same check with the https part left out is not clean."""
    values = {name: value for name, value in own_values().items() if not name.startswith("SECURE_")}
    result = manage(values, tmp_path, "check", "--deploy", "--fail-level", "WARNING")
    assert result.returncode != 0 and "security.W008" in result.stderr, result.stderr


def test_every_variable_has_a_comment_above_it_and_is_a_setting():
    lines = example_lines()
    settings_source = (ROOT / "config" / "settings.py").read_text()
    for index, line in enumerate(lines):
        if LINE.match(line):
            assert index and lines[index - 1].startswith("# "), f"no comment above {line!r}"
            name = LINE.match(line)[1]
            assert f'"{name}"' in settings_source, f"{name} is not read by config/settings.py"


def test_the_examples_placeholders_say_replace_me():
    values = example_values()
    assert EXAMPLE_MARKER in values["SECRET_KEY"] and len(values["SECRET_KEY"]) >= 50
    assert EXAMPLE_MARKER in values["DATABASE_URL"]
    assert values["SITE_URL"].startswith("https://")


def test_the_examples_secret_key_is_refused_at_start_up(tmp_path):
    result = manage(example_values(), tmp_path, "check")
    assert result.returncode != 0
    assert "SECRET_KEY is still the placeholder of deploy/production.env.example" in result.stderr


@pytest.mark.parametrize("key", ["short-but-varied-key", "a" * 60, "django-insecure-" + "x1y2z3" * 10])
def test_a_weak_secret_key_is_refused_over_https(tmp_path, key):
    result = manage(own_values(SECRET_KEY=key), tmp_path, "check")
    assert result.returncode != 0
    assert "SECRET_KEY is too weak for an https install" in result.stderr


def test_a_plain_http_server_install_keeps_a_short_key(tmp_path):
    """Tests, benchmarks and trials run server mode over http with short keys."""
    values = {name: value for name, value in own_values(
        SECRET_KEY="test-only-not-secret", SITE_URL="http://127.0.0.1:8000").items()
        if not name.startswith("SECURE_")}
    result = manage(values, tmp_path, "check")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("key, weak", [
    ("x" * 49 + "abcd", False), ("abcd" * 20, True), ("a1b2c" * 9, True), ("django-insecure-" + "q9w8e7" * 9, True),
    ("Zq8vM1rT6kP3wN9bX2cL7hJ4dG0fS5aY8eU1iO6nR3tK9mB2xV", False),
], ids=["long", "few-unique", "short", "django-insecure", "random"])
def test_weak_keys_are_those_check_deploy_warns_about(key, weak):
    assert is_weak(key) is weak


def test_probes_are_answered_over_plain_http_when_https_is_enforced(client, settings):
    settings.SECURE_SSL_REDIRECT = True
    assert client.get("/healthz").status_code == 200
    assert client.get("/login/").status_code == 301
