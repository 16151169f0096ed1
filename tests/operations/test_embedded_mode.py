"""`make run` as a newcomer runs it: a fresh clone, nothing but Python and make, then the URL,
logins and API key it prints. The README's first API call (docs/first-api-call.sh) works as
written with that key, the demo tenant signs in, and a job fires against a local endpoint
through the embedded scheduler and worker (SQLite and the filesystem broker: no servers)."""

import json
import subprocess

import pytest
import requests

from tests.support.crawl import Browser
from tests.support.deploy import fresh_checkout, trigger_and_wait
from tests.support.processes import free_port, wait_for
from tests.support.terminal import Terminal, clean_environment

pytestmark = pytest.mark.slow


def test_make_run_on_a_fresh_clone_takes_the_first_api_call_and_fires_it(tmp_path, target):
    clone = fresh_checkout(tmp_path / "cronsvc")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    make_run = Terminal("make", ["run", f"PORT={port}"], clone, clean_environment(), tmp_path / "make-run.log",
                        timeout=600)
    try:
        email, password = make_run.expect(r"Demo tenant:\s+login (\S+) / (\S+)").groups()
        api_key = make_run.expect(r"Demo API key:\s+(\S+)").group(1)
        first_job = make_run.expect(r"First job:\s+([^\r\n]+)").group(1).strip()
        make_run.drain()
        wait_for(lambda: _status(f"{base}/healthz") == 200, timeout=120, message="make run's web process")

        # The line make run prints, run in the clone as printed.
        created = subprocess.run(["sh", "-c", first_job], cwd=clone, capture_output=True, text=True, timeout=60)
        assert created.returncode == 0, created.stdout + created.stderr
        assert json.loads(created.stdout)["name"] == "nightly report"

        api = requests.Session()
        api.headers["Authorization"] = f"Bearer {api_key}"
        trigger_and_wait(base, api, target, "/embedded")
        customer = Browser(base, behind_tls_proxy=False)
        signed_in = customer.post_form("/login/", {"username": email, "password": password})
        assert signed_in.status_code == 302, signed_in.text[:1000]
        dashboard = customer.get("/")
        assert dashboard.status_code == 200 and "nightly report" in dashboard.text
    except BaseException:
        print(make_run.output()[-8000:])
        raise
    finally:
        stopped = make_run.interrupt(timeout=60)
    assert stopped, make_run.output()[-4000:]


def _status(url):
    try:
        return requests.get(url, timeout=2).status_code
    except requests.RequestException:
        return None
