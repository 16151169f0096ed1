"""Start-up configuration: loud errors instead of silent defaults."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_int, env_int_map, env_list, env_str

ROOT = Path(__file__).resolve().parents[2]


def _django_check(env):
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_server_mode_without_secret_key_refuses_to_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "SECRET_KEY_FILE"}}
    env.update(DATABASE_URL="postgres://postgres@127.0.0.1:5432/cronsvc", VAR_DIR=str(tmp_path))
    result = _django_check(env)
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_embedded_mode_makes_and_keeps_a_secret_key(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DATABASE_URL", "REDIS_URL"}}
    env["VAR_DIR"] = str(tmp_path)
    assert _django_check(env).returncode == 0
    key = (tmp_path / "secret_key").read_text()
    assert len(key) >= 50
    assert _django_check(env).returncode == 0
    assert (tmp_path / "secret_key").read_text() == key


def test_env_bool_refuses_ambiguous_values(monkeypatch):
    monkeypatch.setenv("FLAG", "yes")
    with pytest.raises(ImproperlyConfigured, match="FLAG='yes'"):
        env_bool("FLAG")
    monkeypatch.setenv("FLAG", "on")
    assert env_bool("FLAG") is True


def test_env_helpers_parse_and_read_files(monkeypatch, tmp_path):
    monkeypatch.setenv("NUM", "12")
    assert env_int("NUM", 1) == 12
    monkeypatch.setenv("NUM", "twelve")
    with pytest.raises(ImproperlyConfigured):
        env_int("NUM", 1)
    monkeypatch.setenv("ITEMS", "eu, us ,")
    assert env_list("ITEMS") == ["eu", "us"]
    secret = tmp_path / "secret"
    secret.write_text("from-file\n")
    monkeypatch.setenv("TOKEN", "from-env")
    monkeypatch.setenv("TOKEN_FILE", str(secret))
    assert env_str("TOKEN") == "from-file"


def test_env_int_map_reads_name_number_pairs(monkeypatch):
    assert env_int_map("RATES", {"*": 1}) == {"*": 1}
    monkeypatch.setenv("RATES", "free=60, pro=600 ,*=0")
    assert env_int_map("RATES", {}) == {"free": 60, "pro": 600, "*": 0}


@pytest.mark.parametrize("raw, bad", [("free=60,pro", "pro"), ("free=sixty", "free=sixty"), ("=60", "=60"),
                                      ("free=-1", "free=-1"), ("free=1.5", "free=1.5")])
def test_env_int_map_names_the_bad_part(monkeypatch, raw, bad):
    monkeypatch.setenv("RATES", raw)
    with pytest.raises(ImproperlyConfigured, match=f"RATES={raw!r}: {bad!r} is not name=number"):
        env_int_map("RATES", {})


def test_a_malformed_host_rate_refuses_to_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update(VAR_DIR=str(tmp_path), HOST_RATE_PER_MINUTE="free=60,pro:600")
    result = _django_check(env)
    assert result.returncode != 0
    assert "ImproperlyConfigured: HOST_RATE_PER_MINUTE='free=60,pro:600': 'pro:600' is not" in result.stderr


def test_an_unknown_broker_scheme_stops_the_start_up_naming_the_variable(tmp_path):
    env = {**os.environ, "CELERY_BROKER_URL": "kafka://127.0.0.1:9092", "VAR_DIR": str(tmp_path)}
    result = _django_check(env)
    assert result.returncode != 0
    assert "ImproperlyConfigured: CELERY_BROKER_URL: unsupported Celery broker URL scheme 'kafka'" in result.stderr


def test_a_bad_sso_network_stops_the_start_up_naming_the_variable(tmp_path):
    env = {**os.environ, "SSO_ALLOWED_NETWORKS": "10.20.0.0/16,not-a-network", "VAR_DIR": str(tmp_path)}
    result = _django_check(env)
    assert result.returncode != 0
    assert "ImproperlyConfigured: SSO_ALLOWED_NETWORKS:" in result.stderr
