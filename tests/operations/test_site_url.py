"""One site URL for every link sent to customers. `make run PORT=18000` writes port 18000
into ping, badge, notification and SSO callback URLs (not 8000); server mode without
SITE_URL, with a SITE_URL whose host ALLOWED_HOSTS refuses, or without EMAIL_URL says so at
start-up and in /readyz (whose details only the callers /metrics admits see)."""

import json
import os
import subprocess
import sys

import pytest

from tests.support.deploy import ROOT

LINKS = """
import json, django
django.setup()
from apps.accounts.sso import redirect_uri
from apps.badges.api import badge_url
from apps.badges.models import Badge
from apps.monitors.models import Monitor
from apps.monitors.serializers import ping_url
from apps.notifications.evidence import execution_url, job_url
print(json.dumps({"ping": ping_url(Monitor(ping_id="p1")), "badge": badge_url(Badge(token="b1")),
                  "run": execution_url(7), "job": job_url(8), "sso": redirect_uri(None)}))
"""


def _settings_process(code, tmp_path, **env):
    """``code`` run by a new Python process on this checkout's settings with ``env`` only
    (no DATABASE_URL unless given: embedded mode)."""
    clean = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "VAR_DIR": str(tmp_path / "var"),
             "DJANGO_SETTINGS_MODULE": "config.settings", "LOG_FORMAT": "json", **env}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=clean, capture_output=True, text=True,
                          timeout=120)


def test_embedded_links_follow_port(tmp_path):
    result = _settings_process(LINKS, tmp_path, PORT="18000")
    assert result.returncode == 0, result.stderr
    links = json.loads(result.stdout)
    assert links == {"ping": "http://127.0.0.1:18000/ping/p1", "badge": "http://127.0.0.1:18000/badge/b1.svg",
                     "run": "http://127.0.0.1:18000/executions/7/", "job": "http://127.0.0.1:18000/jobs/8/",
                     "sso": "http://127.0.0.1:18000/sso/callback/"}
    assert "site_url_unset" not in result.stderr  # embedded mode: following PORT is right


def test_make_run_hands_one_site_url_to_every_process():
    """honcho gives each Procfile line its own PORT (web 18000, scheduler 18100, ...): the
    site URL is therefore set once by make, on the demo's printout and on honcho's line."""
    planned = subprocess.run(["make", "-n", "run", "PORT=18000"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout
    demo = next(line for line in planned.splitlines() if "bootstrap_demo" in line)
    lines = planned.splitlines()
    at = next(i for i, line in enumerate(lines) if "honcho start" in line)
    honcho = "\n".join(lines[at - 1:at + 1])  # the command and the environment line it continues
    assert "SITE_URL=http://127.0.0.1:18000 " in demo and "--url" not in demo
    assert "SITE_URL=http://127.0.0.1:18000 " in honcho and "8000 " not in honcho.replace("18000 ", "")


SERVER = {"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/cronsvc_not_needed", "SECRET_KEY": "test-only-not-secret",
          "REDIS_URL": "redis://127.0.0.1:6379/15"}


def _startup_warnings(tmp_path, **env):
    result = _settings_process("import django; django.setup()", tmp_path, **SERVER, **env)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    return [line["message"] for line in lines if line["logger"] == "cronsvc.health" and line["level"] == "warning"]


def test_server_mode_without_site_url_or_email_url_warns_at_start_up(tmp_path):
    warned = _startup_warnings(tmp_path)
    assert [w.split(":")[1].strip() for w in warned] == ["site_url_unset", "email_unset"], warned
    assert "SITE_URL is not set" in warned[0] and "set EMAIL_URL" in warned[1]


def test_server_mode_with_a_site_url_allowed_hosts_refuses_warns(tmp_path):
    warned = _startup_warnings(tmp_path, SITE_URL="http://cron.example.com", ALLOWED_HOSTS="other.example.com",
                               EMAIL_URL="smtp://mail.example.com:587?tls=1")
    assert len(warned) == 1 and "site_url_mismatch" in warned[0] and "'cron.example.com'" in warned[0]


def test_server_mode_with_mail_to_the_console_warns_that_no_mail_leaves(tmp_path):
    # The same rule decides this warning and whether owners are e-mailed (settings.MAIL_CONFIGURED).
    warned = _startup_warnings(tmp_path, SITE_URL="http://cron.example.com", ALLOWED_HOSTS="cron.example.com",
                               EMAIL_URL="console://")
    assert len(warned) == 1 and "email_unset" in warned[0], warned


def test_server_mode_configured_warns_of_nothing(tmp_path):
    assert _startup_warnings(tmp_path, SITE_URL="http://cron.example.com", ALLOWED_HOSTS="cron.example.com",
                             EMAIL_URL="smtp://mail.example.com:587?tls=1") == []


@pytest.mark.django_db
def test_readyz_warns_of_an_unset_site_url_and_email_url_to_metrics_callers_only(client, settings):
    settings.SITE_URL_SET, settings.MAIL_CONFIGURED = False, False
    settings.METRICS_TOKEN, settings.METRICS_ALLOWED_IPS = "", []
    anonymous = client.get("/readyz")
    assert anonymous.status_code == 200 and anonymous.json() == {"status": "ok"}

    settings.METRICS_ALLOWED_IPS = ["127.0.0.1/32"]
    body = client.get("/readyz").json()
    assert body["status"] == "ok"  # a warning, not a failure
    codes = [w.split(":")[0] for w in body["warnings"]]
    assert "site_url_unset" in codes and "email_unset" in codes

    settings.SITE_URL_SET, settings.MAIL_CONFIGURED = True, True
    settings.SITE_URL, settings.ALLOWED_HOSTS = "https://cron.example.com", ["cron.example.com", "testserver"]
    assert not {"site_url_unset", "site_url_mismatch", "email_unset"} & {
        w.split(":")[0] for w in client.get("/readyz", HTTP_HOST="cron.example.com").json()["warnings"]}


def test_a_variable_nothing_reads_any_more_warns_instead_of_passing_silently(tmp_path):
    warned = _startup_warnings(tmp_path, SITE_URL="http://cron.example.com", ALLOWED_HOSTS="cron.example.com",
                               EMAIL_URL="smtp://mail.example.com:587?tls=1", DELIVERY_ENGINE="threads")
    assert len(warned) == 1 and "variable_removed: DELIVERY_ENGINE is set but no longer read" in warned[0], warned
