"""The README's first API call, docs/first-api-call.sh (the README shows that file's text),
run as written with curl against the demo tenant that `make run` creates (bootstrap_demo),
on a live server: no project id to look up, 201."""

import io
import json
import os
import re
import subprocess
from pathlib import Path

from django.core.management import call_command

from apps.jobs.models import Job
from tests.conftest import ensure_seeded_plans

SCRIPT = Path(__file__).resolve().parents[2] / "docs" / "first-api-call.sh"


def bootstrap_demo(settings, var_dir):
    """What `make run` prints: the demo tenant's API key and how to run the script."""
    settings.VAR_DIR = var_dir
    out = io.StringIO()
    call_command("bootstrap_demo", "--url", "http://127.0.0.1:8000/", stdout=out)
    return out.getvalue()


def run_script(url, api_key, tmp_path):
    """The script with only the two variables it documents; a curlrc of the test's own
    (curl reads $CURL_HOME/.curlrc) adds the HTTP status after the body."""
    curl_home = tmp_path / "curl"
    curl_home.mkdir()
    (curl_home / ".curlrc").write_text('write-out = "\\n%{http_code}"\n')
    env = {"PATH": os.environ["PATH"], "HOME": str(curl_home), "CURL_HOME": str(curl_home),
           "CRONSVC_URL": url, "CRONSVC_API_KEY": api_key}
    result = subprocess.run(["sh", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60)
    body, _, status = result.stdout.rpartition("\n")
    return result, body, status


def test_the_first_api_call_creates_a_job_in_the_demo_tenant(live_server, settings, tmp_path):
    assert '"project"' not in SCRIPT.read_text()  # the point: nothing to look up first
    ensure_seeded_plans()  # transactional tests flush the seeded plans
    printed = bootstrap_demo(settings, tmp_path / "var")
    api_key = re.search(r"Demo API key:\s+(\S+)", printed).group(1)
    assert f"CRONSVC_API_KEY={api_key} sh docs/first-api-call.sh" in printed
    result, body, status = run_script(live_server.url, api_key, tmp_path)
    assert (status, result.returncode) == ("201", 0), (result.stdout, result.stderr)
    job = Job.objects.select_related("project__organization").get(pk=json.loads(body)["id"])
    assert job.project.organization.slug == "demo" and job.project.slug == "default"
    assert (job.name, job.url, job.method, job.cron_expression) == (
        "nightly report", "https://example.com/hook", "POST", "0 3 * * *")


def _command_words(text):
    # The curl command only: comments dropped, line continuations and spacing folded.
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    return " ".join(" ".join(lines).replace("\\", " ").split())


def test_the_readme_shows_the_script_that_is_run():
    readme = (SCRIPT.parents[1] / "README.md").read_text()
    command = _command_words(SCRIPT.read_text())
    assert command.startswith("curl ") and command in _command_words(readme)
