"""The `cronsvc` command run as a real process against a real web process (the Procfile's
line, granian) serving the test database.

One web process per test session (per xdist worker): it starts before the first client
test and stops before the test database is dropped. Each test makes its own tenant and
commits it (transactional tests), so the web process sees it.
"""

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import cronsvc_client
import pytest
import requests

from tests.support.processes import free_port, start_procfile_process, wait_for

CRONSVC = Path(sys.executable).parent / "cronsvc"  # installed by requirements/dev.txt (-e ./client)
# The sources the tests import: the command runs them too (a worktree's with PYTHONPATH set).
CLIENT_SOURCES = Path(cronsvc_client.__file__).resolve().parents[1]
# Runs go to tests/support/target.py on 127.0.0.1; everything else stays refused.
LOCAL_TARGETS = {"OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8"}


@dataclass
class Web:
    base_url: str
    process: object

    def log(self):
        return self.process.output()

    def requests_during(self, action, path):
        """How many requests for ``path`` (query strings are not logged) the web process
        served while ``action()`` ran; the session's tests run one at a time on it."""
        before = len(self.log())
        action()
        return sum(1 for record in _access_records(self.log()[before:])
                   if (record.get("method"), record.get("path"), record.get("status")) == ("GET", path, 200))


def _access_records(log):
    """The web process's access log records (JSON lines of the logger cronsvc.access)."""
    for line in log.splitlines():
        if line.startswith("{") and '"cronsvc.access"' in line:
            record = json.loads(line)
            if record.get("logger") == "cronsvc.access":
                yield record


def _answers(base):
    try:
        return requests.get(f"{base}/healthz", timeout=2).status_code == 200
    except requests.RequestException:
        return False


@pytest.fixture(scope="session")
def web(django_db_setup, tmp_path_factory):
    web = _start_web(tmp_path_factory.mktemp("web"))
    try:
        yield web
    finally:
        web.process.stop()


def _start_web(log_dir):
    """The web process on a free port; tried again on another port when the one chosen was
    taken between choosing and binding it (other tests start servers too)."""
    for attempt in range(3):
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        # CONN_MAX_AGE=0: no idle connection outlives a request, so none is left when the
        # test database is flushed or dropped. SITE_URL: ping URLs point at this process.
        process = start_procfile_process(log_dir, "web", log_name=f"web-{attempt}", PORT=port, WEB_CONCURRENCY=1,
                                         CONN_MAX_AGE=0, SITE_URL=base, **LOCAL_TARGETS)
        wait_for(lambda: _answers(base) or process.popen.poll() is not None, timeout=120,
                 message="the web process to answer")
        if process.popen.poll() is None:
            return Web(base, process)
        process.stop()
        if "in use" not in process.output():
            break
    raise AssertionError("the web process did not start:\n" + process.output()[-3000:])


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self):
        return json.loads(self.out)


class Cli:
    """Runs `cronsvc ARGS` in a process of its own with an environment of its own: only
    PATH, a private HOME (so the config file is the test's) and the CRONSVC_* given. The
    shared virtualenv's command runs the client sources this process imported."""

    def __init__(self, home, url=None, api_key=None, executable=CRONSVC):
        self.home, self.url, self.api_key, self.executable = Path(home), url, api_key, executable

    @property
    def config_file(self):
        return self.home / ".config" / "cronsvc" / "config.toml"

    def environment(self, **extra):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home), "LANG": "C.UTF-8"}
        if Path(self.executable) == CRONSVC:
            env["PYTHONPATH"] = str(CLIENT_SOURCES)
        if self.url:
            env["CRONSVC_URL"] = self.url
        if self.api_key:
            env["CRONSVC_API_KEY"] = self.api_key
        env.update({key: value for key, value in extra.items() if value is not None})
        return env

    def __call__(self, *args, input=None, env=None, timeout=60):
        done = subprocess.run([str(self.executable), *map(str, args)], input=input, capture_output=True,
                              text=True, env=self.environment(**(env or {})), timeout=timeout,
                              stdin=None if input is not None else subprocess.DEVNULL)
        return Result(done.returncode, done.stdout, done.stderr)

    def ok(self, *args, **kwargs):
        """Run and insist on exit code 0; the JSON answer when ``-o json`` was asked for."""
        result = self(*args, **kwargs)
        assert result.code == 0, (result.code, result.out, result.err)
        return result.json() if _asks_for_json(args) else result


def _asks_for_json(args):
    return any(flag in ("-o", "--output") and value == "json" for flag, value in zip(args, args[1:]))


@pytest.fixture
def cronsvc_home(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    return home


@pytest.fixture
def client_tenant(make_tenant):
    """A tenant on a plan that allows minute schedules and a few hundred requests."""
    return make_tenant(plan="enterprise")


@pytest.fixture
def cli(web, client_tenant, cronsvc_home):
    """`cronsvc` for ``client_tenant``, configured through CRONSVC_URL and CRONSVC_API_KEY."""
    return Cli(cronsvc_home, web.base_url, client_tenant.full_api_key)
