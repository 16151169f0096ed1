"""Server mode exactly as a self-hoster runs it: a fresh clone, a new virtualenv with the base
requirements only, the README's deploy steps as written (the env file edited, the Procfile's
release step, the operator created at the prompt, then every other Procfile process under
honcho), then every page of the site loaded as a customer and as an operator: none may
answer 5xx, and a job fires through the real scheduler and workers."""

import json
import os
import re
import secrets
import sys
import threading
import time
from pathlib import Path

import pexpect
import pytest
import requests

from tests.support.crawl import Browser
from tests.support.deploy import ROOT, fresh_checkout, readme_deploy_steps
from tests.support.processes import free_port, wait_for

pytestmark = pytest.mark.slow

OPERATOR_EMAIL = "operator@example.com"
# The machine's own environment, less what the deploy steps' .env must provide.
LEFT_OUT = ("DATABASE_", "REDIS_", "CELERY_", "SECRET_KEY", "DJANGO_", "PYTEST", "VIRTUAL_ENV")


class Deploy:
    """The README's deploy steps in a terminal (pexpect), its output drained to a log."""

    def __init__(self, clone, script, env, log_path):
        self.clone = clone
        self.log_path = log_path
        self.child = pexpect.spawn("bash", ["-e", str(script)], cwd=str(clone), env=env, encoding="utf-8",
                                   codec_errors="replace", timeout=900, dimensions=(50, 250))
        self.child.logfile_read = open(log_path, "w")
        self.drain = None

    def answer_password_prompts(self, password):
        self.child.expect(r"Password: ")
        self.child.sendline(password)
        self.child.expect(r"Password \(again\): ")
        self.child.sendline(password)
        self.child.expect("Superuser created successfully")
        # From here the processes write on: keep reading so the terminal never fills up.
        self.drain = threading.Thread(target=self.child.expect, args=(pexpect.EOF,), kwargs={"timeout": None},
                                      daemon=True)
        self.drain.start()

    def output(self):
        return Path(self.log_path).read_text(errors="replace")

    def interrupt(self, timeout=90):
        """Ctrl-C in the terminal, as the operator stops honcho; True when all stopped in time."""
        if self.child.isalive():
            self.child.sendintr()
        deadline = time.monotonic() + timeout
        while self.child.isalive() and time.monotonic() < deadline:
            time.sleep(0.5)
        stopped = not self.child.isalive()
        self.child.terminate(force=True)
        _kill_processes_in(self.clone)
        return stopped


def _kill_processes_in(folder):
    """Whatever still runs from the clone (a failed test must not leave workers behind)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.readlink(f"/proc/{pid}/cwd").startswith(str(folder)):
                os.kill(int(pid), 9)
        except OSError:
            pass


def _answers(url):
    try:
        return requests.get(url, timeout=2, headers={"X-Forwarded-Proto": "https"}).status_code == 200
    except requests.RequestException:
        return False


def test_readme_deploy_steps_on_a_fresh_clone_serve_every_page(tmp_path, fresh_database, target):
    clone = fresh_checkout(tmp_path / "cronsvc")
    script = tmp_path / "deploy-steps.sh"
    script.write_text(readme_deploy_steps())
    port, password = free_port(), secrets.token_urlsafe(18)
    base = f"http://127.0.0.1:{port}"
    edits = {**fresh_database, "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": "127.0.0.1",
             "SITE_URL": f"https://127.0.0.1:{port}", "PORT": port, "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8",
             "WEB_CONCURRENCY": 1, "WORKER_CONCURRENCY": 2, "EMAIL_URL": "console://"}
    env = {k: v for k, v in os.environ.items() if not k.startswith(LEFT_OUT)}
    env.update(EDITOR=f"{sys.executable} {ROOT / 'tests/support/edit_env.py'}",
               CRONSVC_TEST_ENV_EDITS=json.dumps(edits), PATH=_path_without_venvs(env.get("PATH", "")))
    deploy = Deploy(clone, script, env, tmp_path / "deploy.log")
    try:
        deploy.answer_password_prompts(password)
        wait_for(lambda: _answers(f"{base}/readyz"), timeout=180, message=f"the web process on {base}")
        customer, job_id = _customer_signs_up_and_a_job_fires(base, target)
        _every_customer_page_answers(customer, job_id)
        _every_admin_page_answers(base, password)
    except BaseException:
        print(deploy.output()[-8000:])
        raise
    finally:
        stopped = deploy.interrupt()
    output = deploy.output()
    assert stopped, output[-4000:]
    for name in procfile_names() - {"release"}:
        # Every process type ran until the Ctrl-C, and stopped by itself before honcho's SIGKILL.
        assert f"{name}.1 stopped" in output, (name, output[-4000:])
    assert "SIGKILL" not in output and "sending kill" not in output.lower(), output[-4000:]


def procfile_names():
    return {line.partition(":")[0] for line in (ROOT / "Procfile").read_text().splitlines() if ":" in line}


def _path_without_venvs(path):
    # The deploy makes and activates its own virtualenv; the test's must not be found first.
    return ":".join(p for p in path.split(":") if ".venv" not in p and "/venv" not in p)


def _customer_signs_up_and_a_job_fires(base, target):
    customer = Browser(base)
    assert customer.get("/signup/").status_code == 200
    welcome = customer.post_form("/signup/", {"organization": "Acme", "email": "owner@acme.example",
                                              "password1": "a long pass phrase 42", "password2": "a long pass phrase 42"})
    assert welcome.status_code == 200, welcome.text[:2000]
    api_key = re.search(r"csk_[A-Za-z0-9_\-]+", welcome.text).group(0)
    api = requests.Session()
    api.headers.update({"Authorization": f"Bearer {api_key}", "X-Forwarded-Proto": "https"})
    project = api.get(f"{base}/api/v1/projects/").json()["results"][0]["id"]
    created = api.post(f"{base}/api/v1/jobs/", json={
        "project": project, "name": "Server mode", "schedule": {"type": "cron", "expression": "0 3 * * *"},
        "request": {"url": target.url("/server-mode")}})
    assert created.status_code == 201, created.text
    job_id = created.json()["id"]
    assert api.post(f"{base}/api/v1/jobs/{job_id}/trigger/").status_code == 202

    def succeeded():
        runs = api.get(f"{base}/api/v1/jobs/{job_id}/executions/").json()["results"]
        return runs and runs[0]["status"] == "succeeded"

    wait_for(succeeded, timeout=90, interval=0.5, message="the triggered run to succeed")
    assert len(target.requests_to("/server-mode")) == 1
    return customer, job_id


def _every_customer_page_answers(customer, job_id):
    visit = customer.crawl("/", skip=("/admin/", "/logout/", "/api/v1/", "/settings/data/delete/"))
    for path in ("/api/docs/", "/login/", "/signup/"):
        visit.statuses[path] = Browser(customer.base_url).get(path).status_code
    assert not visit.failures(), visit.failures()
    for path in ("/", "/jobs/new/", f"/jobs/{job_id}/", f"/jobs/{job_id}/history/", f"/jobs/{job_id}/edit/",
                 "/settings/", "/notifications/", "/api/docs/", "/login/", "/signup/"):
        assert visit.statuses.get(path) == 200, (path, visit.statuses.get(path))
    _assets_served(visit)


def _every_admin_page_answers(base, password):
    operator = Browser(base)
    signed_in = operator.post_form("/admin/login/?next=/admin/", {"username": OPERATOR_EMAIL, "password": password})
    assert signed_in.status_code == 302, signed_in.text[:2000]
    visit = operator.crawl("/admin/", within="/admin/", skip=("/admin/logout/",), keep_query=False)
    assert not visit.failures(), visit.failures()
    assert visit.statuses["/admin/"] == 200
    assert sum(1 for path, status in visit.statuses.items() if path.startswith("/admin/") and status == 200) > 30
    _assets_served(visit)


def _assets_served(visit):
    assets = {path: status for path, status in visit.statuses.items() if path.startswith("/static/")}
    assert assets, "no stylesheet, script or image was referenced"
    assert all(status == 200 for status in assets.values()), assets
