"""A real OpenID Connect provider for the single sign-on tests: the Django project in
tests/support/oidc_provider/ (django-oauth-toolkit) served by runserver in its own process,
with its own SQLite database and an RSA signing key made for this run."""

import json
import subprocess
import sys
from dataclasses import dataclass

import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from .processes import ROOT, Process, free_port, wait_for

SETTINGS = "tests.support.oidc_provider.settings"


@dataclass
class Provider:
    process: Process
    issuer: str

    def stop(self):
        self.process.stop()


def _rsa_pem():
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def start_provider(tmp_path, *, users, applications):
    """Migrate, seed (users, applications: see oidc_provider/seed.py) and serve the provider."""
    port = free_port()
    issuer = f"http://127.0.0.1:{port}/o"
    env = {"PATH": "/usr/bin:/bin", "PYTHONUNBUFFERED": "1", "DJANGO_SETTINGS_MODULE": SETTINGS,
           "OIDC_PROVIDER_DB": str(tmp_path / "provider.sqlite3"), "OIDC_PROVIDER_ISSUER": issuer,
           "OIDC_RSA_PRIVATE_KEY": _rsa_pem()}
    spec = tmp_path / "provider.json"
    spec.write_text(json.dumps({"users": users, "applications": applications}))
    for args in (["-m", "django", "migrate", "--noinput", "-v", "0"], ["-m", "tests.support.oidc_provider.seed", str(spec)]):
        subprocess.run([sys.executable, *args], cwd=ROOT, env=env, check=True, timeout=120)
    process = Process([sys.executable, "-m", "django", "runserver", "--noreload", f"127.0.0.1:{port}"],
                      env, tmp_path / "provider.log")

    def up():
        try:
            return requests.get(f"{issuer}/.well-known/openid-configuration", timeout=2).status_code == 200
        except requests.ConnectionError:
            return False

    try:
        wait_for(up, 60, message=f"the OIDC provider on port {port}")
    except AssertionError:
        process.stop()
        raise AssertionError(process.output())
    return Provider(process, issuer)


def sign_in_at_provider(browser, response, email, password):
    """The person at the provider's log-in page that ``response`` (cronsvc's redirect to the
    provider, not followed) leads to: logs in, and returns the provider's redirect back to
    cronsvc's callback (not followed)."""
    page = browser.get(response.headers["Location"], allow_redirects=True, timeout=10)
    token = browser.cookies.get("idp_csrftoken")
    answer = browser.post(page.url, data={"username": email, "password": password,
                                          "csrfmiddlewaretoken": token, "next": _next_of(page.url)},
                          headers={"Referer": page.url}, allow_redirects=False, timeout=10)
    assert answer.status_code == 302, answer.text[:2000]
    return browser.get(_absolute(page.url, answer.headers["Location"]), allow_redirects=False, timeout=10)


def _next_of(url):
    from urllib.parse import parse_qs, urlsplit

    return parse_qs(urlsplit(url).query).get("next", [""])[0]


def _absolute(base, location):
    from urllib.parse import urljoin

    return urljoin(base, location)
