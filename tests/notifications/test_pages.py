"""The notification pages (Django test client): same rules as the API."""

import itertools

import pytest
from django.test import Client

from apps.accounts.models import Membership, User
from apps.notifications.models import Channel, Notification, NotificationRule

SLACK_URL = "https://hooks.slack.com/services/T000/B000/very-secret-token"
_n = itertools.count(1)


@pytest.fixture(autouse=True)
def _private_caches(settings):
    n = next(_n)
    settings.CACHES = {**settings.CACHES, **{alias: {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": f"{alias}-notify-{n}"}
        for alias in ("web", "api")}}


def browser(tenant, role="owner"):
    if role == "owner":
        user = tenant.owner
    else:
        user = User.objects.create_user(email=f"{role}{next(_n)}-page@example.com")
        Membership.objects.create(user=user, organization=tenant.organization, role=role)
    client = Client()
    client.force_login(user)
    return client


def add_slack(client, tenant, url=SLACK_URL):
    return client.post(f"/notifications/projects/{tenant.project.pk}/channels/new/",
                       {"name": "ops", "kind": "slack", "config_url": url, "events": ["failure", "recovery"],
                        "enabled": "on"})


def test_add_a_channel_and_see_it_masked(tenant):
    client = browser(tenant)
    response = add_slack(client, tenant)
    assert response.status_code == 302
    channel = Channel.objects.get()
    assert channel.config == {"url": SLACK_URL} and channel.events == ["failure", "recovery"] and channel.enabled
    page = client.get("/notifications/").content.decode()
    assert "ops" in page and "hooks.slack.com" in page and "very-secret-token" not in page
    edit = client.get(f"/notifications/channels/{channel.pk}/").content.decode()
    assert "very-secret-token" not in edit


def test_invalid_channel_shows_the_error(tenant, settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    response = add_slack(browser(tenant), tenant, url="http://169.254.169.254/latest")
    assert response.status_code == 400
    assert "public http(s) address" in response.content.decode() and not Channel.objects.exists()


def test_edit_keeps_the_secret_and_delete(tenant):
    client = browser(tenant)
    add_slack(client, tenant)
    channel = Channel.objects.get()
    response = client.post(f"/notifications/channels/{channel.pk}/", {"name": "renamed", "config_url": "",
                                                                       "events": ["failure"]})
    assert response.status_code == 302
    channel.refresh_from_db()
    assert channel.name == "renamed" and channel.config["url"] == SLACK_URL and not channel.enabled
    assert client.post(f"/notifications/channels/{channel.pk}/delete/").status_code == 302
    assert not Channel.objects.exists()


def test_test_button_answers_inline(tenant, target):
    client = browser(tenant)
    add_slack(client, tenant, url=target.url("/slack"))
    channel = Channel.objects.get()
    response = client.post(f"/notifications/channels/{channel.pk}/test/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    assert "Test message sent" in response.content.decode() and "<html" not in response.content.decode()
    assert len(target.requests_to("/slack")) == 1


def test_viewer_reads_but_cannot_edit(tenant):
    add_slack(browser(tenant), tenant)
    channel = Channel.objects.get()
    viewer = browser(tenant, "viewer")
    page = viewer.get("/notifications/")
    assert page.status_code == 200 and "ops" in page.content.decode() and "Add a channel" not in page.content.decode()
    assert viewer.post(f"/notifications/channels/{channel.pk}/", {"name": "x"}).status_code == 403
    assert viewer.post(f"/notifications/channels/{channel.pk}/test/").status_code == 403
    assert viewer.post(f"/notifications/channels/{channel.pk}/delete/").status_code == 403
    assert add_slack(viewer, tenant).status_code == 403
    assert viewer.post(f"/notifications/projects/{tenant.project.pk}/rule/", {"failure_threshold": 2}).status_code == 403


def test_another_organizations_ids_are_404(tenant, other_tenant, make_job):
    add_slack(browser(tenant), tenant)
    channel = Channel.objects.get()
    job = make_job(tenant)
    outsider = browser(other_tenant)
    for url in (f"/notifications/channels/{channel.pk}/", f"/notifications/projects/{tenant.project.pk}/rule/",
                f"/jobs/{job.pk}/notification-rule/"):
        assert outsider.get(url).status_code == 404
    for url in (f"/notifications/channels/{channel.pk}/delete/", f"/notifications/channels/{channel.pk}/test/"):
        assert outsider.post(url).status_code == 404
    assert add_slack(outsider, tenant).status_code == 404
    assert "ops" not in outsider.get("/notifications/").content.decode()


def test_project_and_job_rules(tenant, make_job):
    client = browser(tenant)
    job = make_job(tenant)
    response = client.post(f"/notifications/projects/{tenant.project.pk}/rule/",
                           {"failure_threshold": "3", "notify_recovery": "on", "reminder_hours": "4"})
    assert response.status_code == 302
    rule = NotificationRule.objects.get(job=None)
    assert (rule.failure_threshold, rule.notify_recovery, rule.notify_disabled, rule.reminder_hours) == (3, True,
                                                                                                        False, 4)
    page = client.get(f"/jobs/{job.pk}/notification-rule/").content.decode()
    assert "follows its project" in page
    bad = client.post(f"/jobs/{job.pk}/notification-rule/", {"failure_threshold": "0"})
    assert bad.status_code == 400 and "between 1 and 1000" in bad.content.decode()
    client.post(f"/jobs/{job.pk}/notification-rule/", {"failure_threshold": "1", "late_after_seconds": "90"})
    assert NotificationRule.objects.get(job=job).late_after_seconds == 90
    client.post(f"/jobs/{job.pk}/notification-rule/", {"inherit": "on"})
    assert not NotificationRule.objects.filter(job=job).exists()
    assert f"/jobs/{job.pk}/notification-rule/" in client.get(f"/jobs/{job.pk}/edit/").content.decode()


def test_notification_log(tenant, other_tenant):
    Notification.objects.create(organization=tenant.organization, project=tenant.project, event="failure",
                                subject="Job failing: nightly", text="t", status="failed", last_error="HTTP 500")
    Notification.objects.create(organization=other_tenant.organization, project=other_tenant.project,
                                event="failure", subject="Job failing: theirs", text="t")
    page = browser(tenant).get("/notifications/log/").content.decode()
    assert "Job failing: nightly" in page and "HTTP 500" in page and "theirs" not in page
    assert "nightly" not in browser(tenant).get("/notifications/log/?status=sent").content.decode()


def test_test_button_without_javascript(tenant, target):
    client = browser(tenant)
    add_slack(client, tenant, url=target.url("/status/500"))
    channel = Channel.objects.get()
    response = client.post(f"/notifications/channels/{channel.pk}/test/", follow=True)
    assert "Test message to “ops”: failed — HTTP 500" in response.content.decode()
