"""A web process on a host where collectstatic never ran (a skipped release step, a release
phase in another container) still serves every page and its assets, and says what to run."""

import re

import pytest
import requests

from tests.support.processes import free_port, start_procfile_process, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_pages_and_assets_are_served_without_collected_static_files(tmp_path):
    port = free_port()
    web = start_procfile_process(tmp_path, "web", PORT=port, WEB_CONCURRENCY=1,
                                 STATIC_ROOT=tmp_path / "never-collected")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _status(f"{base}/healthz") == 200, timeout=120, message="the web process")
        page = requests.get(f"{base}/login/", timeout=10)
        assets = re.findall(r'(?:href|src)="(/static/[^"]+)"', page.text)
        statuses = {asset: _status(base + asset) for asset in assets}
        admin = _status(f"{base}/admin/login/")
    finally:
        web.stop()
    assert page.status_code == 200, page.text[:500]
    assert admin == 200
    assert assets and all(status == 200 for status in statuses.values()), statuses
    assert all(not re.search(r"\.[0-9a-f]{12}\.", asset) for asset in assets), "names hashed without a manifest"
    assert "static files were not collected" in web.output()


def _status(url):
    try:
        return requests.get(url, timeout=5).status_code
    except requests.RequestException:
        return None
