"""The API key cache across processes: a real web process (the Procfile's line) has the key
cached; the change is made here, in another process, and its next request is refused."""

import pytest
import requests

from apps.accounts import services
from tests.support.processes import free_port, start_procfile_process, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def web(tmp_path):
    port = free_port()
    process = start_procfile_process(tmp_path, "web", PORT=port, WEB_CONCURRENCY=1, CONN_MAX_AGE=0)
    base = f"http://127.0.0.1:{port}"

    def answers():
        try:
            return requests.get(f"{base}/healthz", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    try:
        wait_for(answers, timeout=120, message="the web process to answer")
        yield base
    finally:
        process.stop()


def _get(base, key):
    return requests.get(f"{base}/api/v1/projects/", headers={"Authorization": f"Bearer {key}"}, timeout=10)


def test_a_key_revoked_in_another_process_is_refused_at_once(web, make_tenant):
    tenant = make_tenant()
    assert [_get(web, tenant.full_api_key).status_code for _ in range(3)] == [200] * 3  # cached by now
    services.revoke_api_key(tenant.api_key)
    response = _get(web, tenant.full_api_key)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "invalid_api_key"


def test_an_organization_suspended_in_another_process_is_refused_at_once(web, make_tenant):
    tenant = make_tenant()
    assert [_get(web, tenant.full_api_key).status_code for _ in range(3)] == [200] * 3
    services.suspend_organization(tenant.organization, reason="abuse")
    assert _get(web, tenant.full_api_key).status_code == 401
    services.unsuspend_organization(tenant.organization)
    assert _get(web, tenant.full_api_key).status_code == 200
