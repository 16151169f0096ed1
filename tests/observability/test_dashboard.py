"""The operators' dashboard: staff only, and it shows the last hour's runs, failing hosts,
queues and processes."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions.models import Attempt, Execution
from apps.observability.dashboard import id_floor
from apps.observability.heartbeats import Beat

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user(email="ops@example.com", password="pw-ops-123456",
                                                 is_staff=True, is_superuser=True)


def finished(job, tenant, status, at, url="https://failing.example/hook", error_kind="", trigger="manual"):
    execution = Execution.objects.create(
        job=job, organization=tenant.organization, trigger=trigger, status=status,
        scheduled_for=at - timedelta(seconds=2, microseconds=Execution.objects.count()),
        started_at=at - timedelta(seconds=1), finished_at=at, attempt=1, error_kind=error_kind)
    Attempt.objects.create(execution=execution, number=1, started_at=at, finished_at=at, request_method="POST",
                           request_url=url, outcome="succeeded" if status == "succeeded" else "failed")
    return execution


def test_staff_see_the_last_hour(client, staff, tenant, make_job, settings):
    settings.HEARTBEAT_INTERVAL = 5
    job = make_job(tenant)
    now = timezone.now()
    for _ in range(2):
        finished(job, tenant, "succeeded", now, url="https://fine.example/")
    finished(job, tenant, "succeeded", now, url="https://fine.example/", trigger="schedule")
    finished(job, tenant, "failed", now, error_kind="http_status")
    Beat("scheduler", name="sched-on-test").beat(force=True)
    client.force_login(staff)
    response = client.get("/admin/operations/")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'id="ops-total">4<' in page
    assert 'id="ops-failed">1<' in page
    assert "25.0 %" in page
    assert "1.0 s / 1.0 s (1 runs)" in page  # due -> claimed, scheduled runs only
    assert "failing.example" in page and "fine.example" not in page
    assert "sched-on-test" in page
    assert ">default<" in page  # queue depths


def test_the_admin_index_links_to_the_dashboard(client, staff):
    client.force_login(staff)
    assert "/admin/operations/" in client.get("/admin/").content.decode()


def test_non_staff_are_sent_to_the_admin_login(client, tenant):
    client.force_login(tenant.owner)
    response = client.get("/admin/operations/")
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")
    client.logout()
    assert client.get("/admin/operations/").status_code == 302


def test_the_id_floor_orders_before_every_later_uuid7():
    from cronsvc.ids import uuid7

    now = timezone.now()
    floor = id_floor(now)
    assert uuid7(int(now.timestamp() * 1000)) >= floor
    assert uuid7(int((now - timedelta(seconds=1)).timestamp() * 1000)) < floor
