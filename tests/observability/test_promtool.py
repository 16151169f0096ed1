"""/metrics passes Prometheus's own linter: `promtool check metrics` (Debian's prometheus
package, installed by `make promtool`) finds no problem in the text the web process serves."""

import shutil
import subprocess

import pytest

from .scrape import fresh_process_metrics

pytestmark = pytest.mark.django_db


def promtool_check(text):
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: `make promtool` installs it (Debian's prometheus package)"
    return subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60,
                          check=False)


def test_promtool_finds_a_problem_when_there_is_one():
    # The check itself works: a counter without the _total suffix is reported.
    result = promtool_check("# HELP requests Requests.\n# TYPE requests counter\nrequests 1\n")
    assert "counter metrics should have \"_total\" suffix" in result.stdout + result.stderr


def test_metrics_pass_promtool_check_metrics(client, metrics_open, tenant):
    client.get("/healthz")  # one latency series at least
    response = client.get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert 'cronsvc_sweeper_republishes_total{reason="lost"} 0.0' in text
    result = promtool_check(text)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_multiprocess_metrics_pass_promtool_check_metrics(tmp_path):
    # With PROMETHEUS_MULTIPROC_DIR (production) /metrics adds up the processes' files.
    text = fresh_process_metrics(PROMETHEUS_MULTIPROC_DIR=tmp_path)
    assert 'cronsvc_sweeper_republishes_total{reason="lost"} 0.0' in text
    result = promtool_check(text)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")
