"""Real processes and a real browser for the browser tests.

The web process is granian with whitenoise serving a collectstatic output (as in
production); the scheduler and the worker come from tests/support/processes.py; the
browser is Debian's Chromium driven by Playwright (its own browser download does not
work here, so it is never used).
"""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from tests.support.processes import ROOT, Process, process_env

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
OUTPUT = ROOT / "test-output"
# Processes may call the local target server; everything else stays refused.
LOCAL_TARGETS = {"OUTBOUND_ALLOWED_NETWORKS": "127.0.0.0/8",
                 "EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend"}


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def collectstatic(static_root: Path):
    env = process_env(STATIC_ROOT=static_root)
    subprocess.run([sys.executable, "manage.py", "collectstatic", "--noinput", "--verbosity", "0"],
                   cwd=ROOT, env=env, check=True, timeout=300)


class Web:
    def __init__(self, process, base_url):
        self.process, self.base_url = process, base_url

    def url(self, path):
        return self.base_url + path

    def stop(self):
        return self.process.stop()


def start_web(tmp_path, static_root, **env):
    """The web server (granian, as the Procfile runs it) on a free port; tried again on
    another port if the one chosen was taken between choosing it and binding it."""
    # Every test calls from 127.0.0.1 and the per-IP key-creation counter lives in the shared
    # Redis: lift it, or other tests' key creations would refuse ours. CONN_MAX_AGE=0: no
    # idle connection outlives a request, so none lingers when the test database is dropped.
    env = {"API_KEY_CREATE_PER_IP_PER_HOUR": 1_000_000, "CONN_MAX_AGE": 0, **LOCAL_TARGETS, **env}
    for attempt in range(3):
        port = free_port()
        args = [sys.executable, "-m", "granian", "--interface", "wsgi", "config.wsgi:application",
                "--host", "127.0.0.1", "--port", str(port), "--workers", "1", "--blocking-threads", "8",
                "--access-log"]
        process = Process(args, process_env(STATIC_ROOT=static_root, **env), tmp_path / f"web-{attempt}.log")
        web = Web(process, f"http://127.0.0.1:{port}")
        if _answers(web):
            return web
        process.stop()
        if "in use" not in process.output():
            break
    raise AssertionError("the web process did not start:\n" + process.output()[-3000:])


def _answers(web, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if web.process.popen.poll() is not None:
            return False
        try:
            if requests.get(web.url("/healthz"), timeout=2).status_code == 200:
                return True
        except requests.RequestException:
            pass
        time.sleep(0.2)
    return False


def launch_browser(playwright):
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def sign_in(browser, web, user, password, timeout_ms, **context_options):
    """A new browser context signed in as ``user`` on the dashboard; returns (context, page)."""
    context = browser.new_context(**context_options)
    context.set_default_timeout(timeout_ms)
    page = context.new_page()
    page.goto(web.url("/login/"))
    page.get_by_label("E-mail address").fill(user.email)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Jobs", exact=True).wait_for()
    return context, page
