"""Server mode exactly as a self-hoster runs it: a fresh clone, a new virtualenv with the base
requirements only, the deploy steps of docs/deploy.md as written (the env file edited, the
Procfile's release step, the operator created at the prompt, then every other Procfile process
under honcho), then every page of the site loaded as a customer and as an operator: none may
answer 5xx, and a job fires through the real scheduler and workers."""

import json
import re
import secrets
import sys

import pytest
import requests

from tests.support.crawl import Browser
from tests.support.deploy import ROOT, deploy_steps, fresh_checkout, trigger_and_wait
from tests.support.processes import free_port, wait_for
from tests.support.terminal import Terminal, clean_environment

from .conftest import SHARED_REDIS_GROUP

pytestmark = [pytest.mark.slow, SHARED_REDIS_GROUP]

OPERATOR_EMAIL = "operator@example.com"


def test_the_deploy_steps_on_a_fresh_clone_serve_every_page(tmp_path, fresh_database, target):
    clone = fresh_checkout(tmp_path / "cronsvc")
    script = tmp_path / "deploy-steps.sh"
    script.write_text(deploy_steps())
    port, password = free_port(), secrets.token_urlsafe(18)
    base = f"http://127.0.0.1:{port}"
    edits = {**fresh_database, "SECRET_KEY": secrets.token_urlsafe(50), "ALLOWED_HOSTS": "127.0.0.1",
             "SITE_URL": f"https://127.0.0.1:{port}", "PORT": port, "OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8",
             "WEB_CONCURRENCY": 1, "WORKER_CONCURRENCY": 2, "EMAIL_URL": "console://"}
    env = clean_environment(EDITOR=f"{sys.executable} {ROOT / 'tests/support/edit_env.py'}",
                            CRONSVC_TEST_ENV_EDITS=json.dumps(edits))
    deploy = Terminal("bash", ["-e", str(script)], clone, env, tmp_path / "deploy.log")
    try:
        _create_the_operator_at_the_prompt(deploy, password)
        deploy.drain()
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


def _answers(url):
    try:
        return requests.get(url, timeout=2, headers={"X-Forwarded-Proto": "https"}).status_code == 200
    except requests.RequestException:
        return False


def procfile_names():
    return {line.partition(":")[0] for line in (ROOT / "Procfile").read_text().splitlines() if ":" in line}


def _create_the_operator_at_the_prompt(deploy, password):
    # The venv, pip and the release step run first: the prompt comes minutes later on a cold cache.
    deploy.expect(r"Password: ")
    deploy.send(password)
    deploy.expect(r"Password \(again\): ")
    deploy.send(password)
    deploy.expect("Superuser created successfully")


def _customer_signs_up_and_a_job_fires(base, target):
    customer = Browser(base)
    assert customer.get("/signup/").status_code == 200
    welcome = customer.post_form("/signup/", {"organization": "Acme", "email": "owner@acme.example",
                                              "password1": "a long pass phrase 42", "password2": "a long pass phrase 42"})
    assert welcome.status_code == 302 and welcome.headers["Location"] == "/welcome/", welcome.text[:2000]
    welcome = customer.get("/welcome/")
    assert welcome.status_code == 200, welcome.text[:2000]
    api_key = re.search(r"csk_[A-Za-z0-9_\-]+", welcome.text).group(0)
    api = requests.Session()
    api.headers.update({"Authorization": f"Bearer {api_key}", "X-Forwarded-Proto": "https"})
    job_id = trigger_and_wait(base, api, target, "/server-mode")  # no project: the new organization has one
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
