"""`make run` as a newcomer runs it: a fresh clone, nothing but Python and make, then the URL,
logins and API key it prints. The README's first API call (docs/first-api-call.sh) works as
written with that key, the demo tenant signs in, and a job fires against a local endpoint
through the embedded scheduler and worker (SQLite and the filesystem broker: no servers)."""

import json
import os
import subprocess
import threading
import time

import pexpect
import pytest
import requests

from tests.operations.test_server_mode import _kill_processes_in, _path_without_venvs
from tests.support.crawl import Browser
from tests.support.deploy import fresh_checkout
from tests.support.processes import free_port, wait_for

pytestmark = pytest.mark.slow

LEFT_OUT = ("DATABASE_", "REDIS_", "CELERY_", "SECRET_KEY", "DJANGO_", "PYTEST", "VIRTUAL_ENV", "MAKE")


def test_make_run_on_a_fresh_clone_takes_the_first_api_call_and_fires_it(tmp_path, target):
    clone = fresh_checkout(tmp_path / "cronsvc")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(LEFT_OUT)}
    env["PATH"] = _path_without_venvs(env.get("PATH", ""))
    child = pexpect.spawn("make", ["run", f"PORT={port}"], cwd=str(clone), env=env, encoding="utf-8",
                          codec_errors="replace", timeout=600, dimensions=(50, 250))
    child.logfile_read = open(tmp_path / "make-run.log", "w")
    try:
        child.expect(r"Demo tenant:\s+login (\S+) / (\S+)")
        email, password = child.match.group(1), child.match.group(2)
        child.expect(r"Demo API key:\s+(\S+)")
        api_key = child.match.group(1)
        child.expect(r"First job:\s+([^\r\n]+)")
        first_job = child.match.group(1).strip()
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: _status(f"{base}/healthz") == 200, timeout=120, message="make run's web process")
        _drain(child)

        # The line make run prints, run in the clone as printed.
        created = subprocess.run(["sh", "-c", first_job], cwd=clone, capture_output=True, text=True, timeout=60)
        assert created.returncode == 0, created.stdout + created.stderr
        assert json.loads(created.stdout)["name"] == "nightly report"

        _a_job_fires(base, api_key, target)
        customer = Browser(base, behind_tls_proxy=False)
        signed_in = customer.post_form("/login/", {"username": email, "password": password})
        assert signed_in.status_code == 302, signed_in.text[:1000]
        dashboard = customer.get("/")
        assert dashboard.status_code == 200 and "nightly report" in dashboard.text
    finally:
        if child.isalive():
            child.sendintr()
            deadline = time.monotonic() + 60
            while child.isalive() and time.monotonic() < deadline:
                time.sleep(0.5)
        child.terminate(force=True)
        _kill_processes_in(clone)


def _a_job_fires(base, api_key, target):
    api = requests.Session()
    api.headers["Authorization"] = f"Bearer {api_key}"
    created = api.post(f"{base}/api/v1/jobs/", json={
        "name": "local endpoint", "schedule": {"type": "cron", "expression": "0 3 * * *"},
        "request": {"url": target.url("/embedded")}})
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    assert api.post(f"{base}/api/v1/jobs/{job_id}/trigger/").status_code == 202

    def succeeded():
        runs = api.get(f"{base}/api/v1/jobs/{job_id}/executions/").json()["results"]
        return runs and runs[0]["status"] == "succeeded"

    wait_for(succeeded, timeout=90, interval=0.5, message="the triggered run to succeed")
    assert len(target.requests_to("/embedded")) == 1


def _drain(child):
    # make run's processes write on: keep reading so the terminal never fills up.
    threading.Thread(target=child.expect, args=(pexpect.EOF,), kwargs={"timeout": None}, daemon=True).start()


def _status(url):
    try:
        return requests.get(url, timeout=2).status_code
    except requests.RequestException:
        return None
