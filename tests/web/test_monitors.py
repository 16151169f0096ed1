"""The monitors' pages: create, edit, pause/resume and delete through the forms, the ping
URL shown to copy, the nav link, roles and tenancy."""

import pytest

from apps.accounts.models import AuditEvent
from apps.monitors.models import Monitor
from apps.monitors.services import create_monitor

pytestmark = pytest.mark.django_db


def monitor_form(tenant, **overrides):
    data = {"name": "Nightly backup", "project": str(tenant.project.pk), "schedule_type": "cron",
            "cron_expression": "0 2 * * *", "interval_seconds": "", "timezone": "Europe/Berlin",
            "grace_seconds": "1800"}
    return {**data, **overrides}


@pytest.fixture
def monitor(tenant):
    return create_monitor(project=tenant.project, name="backup", schedule_type="interval", interval_seconds=3600,
                          grace_seconds=600)


def test_create_from_the_form_shows_the_ping_url(tenant, owner):
    page = owner.get("/monitors/new/")
    assert page.status_code == 200 and 'name="cron_expression"' in page.content.decode()
    response = owner.post("/monitors/new/", monitor_form(tenant))
    monitor = Monitor.objects.get(name="Nightly backup")
    assert response.status_code == 302 and response["Location"] == f"/monitors/{monitor.pk}/"
    assert (monitor.schedule_type, monitor.cron_expression, monitor.timezone, monitor.grace_seconds) == (
        "cron", "0 2 * * *", "Europe/Berlin", 1800)
    assert monitor.state == "new" and monitor.organization_id == tenant.organization.pk
    detail = owner.get(response["Location"]).content.decode()
    assert f"/ping/{monitor.ping_id}" in detail and "Nightly backup" in detail
    assert AuditEvent.objects.filter(action="monitor.create").count() == 1


def test_the_form_shows_the_apis_refusals(tenant, owner):
    response = owner.post("/monitors/new/", monitor_form(tenant, cron_expression="61 * * * *", grace_seconds="0"))
    assert response.status_code == 400
    errors = response.context["errors"]
    assert set(errors) == {"cron_expression", "grace_seconds"}
    assert 'aria-invalid="true"' in response.content.decode()
    response = owner.post("/monitors/new/", monitor_form(tenant, schedule_type="interval", interval_seconds=""))
    assert response.status_code == 400 and "interval_seconds" in response.context["errors"]
    assert not Monitor.objects.exists()


def test_the_plan_limit_is_a_form_error(tenant, owner, monitor):
    plan = tenant.organization.plan
    plan.max_monitors = 1
    plan.save()
    response = owner.post("/monitors/new/", monitor_form(tenant))
    assert response.status_code == 400 and response.context["errors"]["__all__"]
    assert Monitor.objects.count() == 1


def test_edit_pause_resume_delete(tenant, owner, monitor):
    page = owner.get(f"/monitors/{monitor.pk}/edit/")
    assert page.status_code == 200 and 'value="backup"' in page.content.decode()
    response = owner.post(f"/monitors/{monitor.pk}/edit/", monitor_form(
        tenant, name="backup v2", schedule_type="interval", interval_seconds="600", grace_seconds="60"))
    assert response.status_code == 302
    monitor.refresh_from_db()
    assert (monitor.name, monitor.interval_seconds, monitor.grace_seconds) == ("backup v2", 600, 60)
    assert owner.post(f"/monitors/{monitor.pk}/pause/").status_code == 302
    assert Monitor.objects.get(pk=monitor.pk).state == "paused"
    assert owner.post(f"/monitors/{monitor.pk}/resume/").status_code == 302
    assert Monitor.objects.get(pk=monitor.pk).state == "new"
    assert "Delete “backup v2”?" in owner.get(f"/monitors/{monitor.pk}/delete/").content.decode()
    assert owner.post(f"/monitors/{monitor.pk}/delete/")["Location"] == "/monitors/"
    assert not Monitor.objects.filter(pk=monitor.pk).exists()
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"monitor.update", "monitor.pause", "monitor.resume", "monitor.delete"} <= actions


def test_list_and_nav_link(tenant, owner, monitor):
    page = owner.get("/monitors/").content.decode()
    assert f'href="/monitors/{monitor.pk}/"' in page and 'href="/monitors/new/"' in page
    dashboard = owner.get("/").content.decode()
    assert 'href="/monitors/"' in dashboard


def test_another_tenants_monitor_is_404_everywhere(tenant, other_tenant, owner):
    theirs = create_monitor(project=other_tenant.project, name="their backup", schedule_type="interval",
                            interval_seconds=60, grace_seconds=60)
    for url in ("/monitors/{}/", "/monitors/{}/edit/", "/monitors/{}/delete/"):
        assert owner.get(url.format(theirs.pk)).status_code == 404
    for url in ("/monitors/{}/edit/", "/monitors/{}/delete/", "/monitors/{}/pause/", "/monitors/{}/resume/"):
        assert owner.post(url.format(theirs.pk), monitor_form(tenant)).status_code == 404
    assert "their backup" not in owner.get("/monitors/").content.decode()
    theirs.refresh_from_db()
    assert (theirs.name, theirs.state) == ("their backup", "new")


def test_a_viewer_reads_but_cannot_change(tenant, web_client, monitor):
    viewer = web_client(tenant, "viewer")
    page = viewer.get(f"/monitors/{monitor.pk}/").content.decode()
    assert f"/ping/{monitor.ping_id}" in page and "/edit/" not in page
    assert viewer.get("/monitors/new/").status_code == 403
    for url in ("/monitors/{}/edit/", "/monitors/{}/delete/", "/monitors/{}/pause/"):
        assert viewer.post(url.format(monitor.pk)).status_code == 403
    assert Monitor.objects.get(pk=monitor.pk).state == "new"
