"""/api/v1/channels/, /notifications/, /event-subscriptions/ and the rules: roles, tenancy,
masking, validation codes."""

import pytest
from rest_framework.test import APIClient

from apps.accounts.models import AuditEvent, Membership
from apps.notifications.models import Channel, Notification
from tests.api.conftest import error_of

SLACK_URL = "https://hooks.slack.com/services/T000/B000/very-secret-token"


def member(tenant, role):
    from apps.accounts.models import User

    user = User.objects.create_user(email=f"{role}-{tenant.organization.slug}@example.com")
    Membership.objects.create(user=user, organization=tenant.organization, role=role)
    client = APIClient()
    client.force_login(user)
    return client


def create_slack(api, tenant, url=SLACK_URL):
    return api.post("/api/v1/channels/", {"project": str(tenant.project.pk), "kind": "slack", "name": "ops",
                                          "config": {"url": url}}, format="json")


def test_create_masks_the_url_and_audits(api, tenant):
    response = create_slack(api, tenant)
    assert response.status_code == 201, response.json()
    body = response.json()
    assert "very-secret-token" not in str(body) and body["config"]["url"].startswith("https://hooks.slack.com/")
    assert body["events"] and "signing_secret" not in body
    listed = api.get("/api/v1/channels/").json()
    assert "very-secret-token" not in str(listed)
    assert Channel.objects.get().config["url"] == SLACK_URL  # stored whole (encrypted)
    assert AuditEvent.objects.filter(action="channel.create").exists()


def test_webhook_secret_is_shown_once(api, tenant):
    response = api.post("/api/v1/channels/", {"project": str(tenant.project.pk), "kind": "webhook", "name": "hook",
                                              "config": {"url": "https://example.com/hook"}}, format="json")
    secret = response.json()["signing_secret"]
    assert secret.startswith("whsec_")
    again = api.get(f"/api/v1/channels/{response.json()['id']}/").json()
    assert secret not in str(again) and "signing_secret" not in again


def test_update_keeps_secrets_left_out(api, tenant):
    channel_id = create_slack(api, tenant).json()["id"]
    response = api.patch(f"/api/v1/channels/{channel_id}/", {"name": "renamed", "events": ["failure"]},
                         format="json")
    assert response.status_code == 200, response.json()
    channel = Channel.objects.get()
    assert channel.name == "renamed" and channel.events == ["failure"] and channel.config["url"] == SLACK_URL


@pytest.mark.parametrize("body,field,code", [
    ({"kind": "slack", "config": {"url": "http://10.0.0.1/hook"}}, "config.url", "forbidden_target"),
    ({"kind": "slack", "config": {"url": "ftp://x"}}, "config.url", "invalid_url"),
    ({"kind": "slack", "config": {"url": "https://hoöks.example/x"}}, "config.url", "invalid_host"),
    ({"kind": "webhook", "config": {"url": "https://xn--/x"}}, "config.url", "invalid_host"),
    ({"kind": "slack", "config": {"url": SLACK_URL, "token": "x"}}, "config.token", "unknown_field"),
    ({"kind": "email", "config": {"to": ["not-an-address"]}}, "config.to", "invalid_email"),
    ({"kind": "telegram", "config": {"bot_token": "x", "chat_id": "1"}}, "config.bot_token", "invalid_token"),
    ({"kind": "fax", "config": {}}, "kind", "invalid_choice"),
    ({"kind": "slack", "config": {"url": SLACK_URL}, "events": ["party"]}, "events.0", "invalid_choice"),
])
def test_bad_config_is_a_400_with_a_code(api, tenant, settings, body, field, code):
    settings.OUTBOUND_ALLOWED_NETWORKS = []
    response = api.post("/api/v1/channels/", {"project": str(tenant.project.pk), "name": "x", **body}, format="json")
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == code and field in error["fields"], error


def test_kind_cannot_change(api, tenant):
    channel_id = create_slack(api, tenant).json()["id"]
    response = api.patch(f"/api/v1/channels/{channel_id}/", {"kind": "discord"}, format="json")
    assert response.status_code == 400 and error_of(response)["code"] == "immutable"


def test_other_organizations_channels_are_404(api, other_api, tenant, other_tenant):
    channel_id = create_slack(api, tenant).json()["id"]
    for method in ("get", "patch", "delete"):
        assert getattr(other_api, method)(f"/api/v1/channels/{channel_id}/", {}, format="json").status_code == 404
    assert other_api.post(f"/api/v1/channels/{channel_id}/test/").status_code == 404
    assert other_api.get("/api/v1/channels/").json()["results"] == []
    response = other_api.post("/api/v1/channels/", {"project": str(tenant.project.pk), "kind": "slack", "name": "x",
                                                    "config": {"url": SLACK_URL}}, format="json")
    assert response.status_code == 400 and "project" in error_of(response)["fields"]


def test_viewer_reads_developer_edits(api, tenant):
    channel_id = create_slack(api, tenant).json()["id"]
    viewer = member(tenant, Membership.Role.VIEWER)
    assert viewer.get(f"/api/v1/channels/{channel_id}/").status_code == 200
    assert viewer.patch(f"/api/v1/channels/{channel_id}/", {"name": "x"}, format="json").status_code == 403
    assert viewer.post(f"/api/v1/channels/{channel_id}/test/").status_code == 403
    developer = member(tenant, Membership.Role.DEVELOPER)
    assert developer.patch(f"/api/v1/channels/{channel_id}/", {"name": "y"}, format="json").status_code == 200
    assert developer.delete(f"/api/v1/channels/{channel_id}/").status_code == 204


def test_test_endpoint_reports_the_result(api, tenant, target):
    channel_id = create_slack(api, tenant, url=target.url("/status/502")).json()["id"]
    response = api.post(f"/api/v1/channels/{channel_id}/test/")
    assert response.status_code == 200 and response.json()["status"] == "failed"
    assert "HTTP 502" in response.json()["detail"]
    log = api.get("/api/v1/notifications/").json()["results"]
    assert [(row["event"], row["status"]) for row in log] == [("test", "failed")]


def test_notification_log_is_per_organization(api, other_api, tenant):
    Notification.objects.create(organization=tenant.organization, project=tenant.project, event="failure",
                                subject="s", text="t")
    assert len(api.get("/api/v1/notifications/").json()["results"]) == 1
    assert other_api.get("/api/v1/notifications/").json()["results"] == []
    assert api.post("/api/v1/notifications/", {}, format="json").status_code == 405


def test_event_subscriptions(api, other_api, tenant):
    response = api.post("/api/v1/event-subscriptions/", {
        "project": str(tenant.project.pk), "url": "https://example.com/events/secret-path",
        "event_types": ["job.execution.failed"]}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["signing_secret"].startswith("whsec_") and "secret-path" not in body["url"]
    shown = api.get(f"/api/v1/event-subscriptions/{body['id']}/").json()
    assert "signing_secret" not in shown and "secret-path" not in str(shown)
    assert other_api.get(f"/api/v1/event-subscriptions/{body['id']}/").status_code == 404
    bad = api.post("/api/v1/event-subscriptions/", {"project": str(tenant.project.pk), "url": "https://example.com",
                                                    "event_types": ["job.exploded"]}, format="json")
    assert bad.status_code == 400 and error_of(bad)["code"] == "invalid_choice"
    assert api.delete(f"/api/v1/event-subscriptions/{body['id']}/").status_code == 204


def test_rules_of_project_and_job(api, other_api, tenant, make_job):
    job = make_job(tenant)
    assert api.get(f"/api/v1/jobs/{job.pk}/notification-rule/").json() == {
        "source": "default", "failure_threshold": 1, "notify_recovery": True, "notify_disabled": True,
        "late_after_seconds": None, "long_running_seconds": None, "reminder_hours": None}
    response = api.put(f"/api/v1/projects/{tenant.project.pk}/notification-rule/",
                       {"failure_threshold": 3, "reminder_hours": 6}, format="json")
    assert response.status_code == 200 and response.json()["source"] == "project"
    assert api.get(f"/api/v1/jobs/{job.pk}/notification-rule/").json()["failure_threshold"] == 3
    response = api.put(f"/api/v1/jobs/{job.pk}/notification-rule/", {"late_after_seconds": 120}, format="json")
    assert response.json()["source"] == "job" and response.json()["late_after_seconds"] == 120
    bad = api.put(f"/api/v1/jobs/{job.pk}/notification-rule/", {"failure_threshold": 0}, format="json")
    assert bad.status_code == 400 and "failure_threshold" in error_of(bad)["fields"]
    unknown = api.put(f"/api/v1/jobs/{job.pk}/notification-rule/", {"threshold": 2}, format="json")
    assert unknown.status_code == 400 and error_of(unknown)["code"] == "unknown_field"
    assert api.delete(f"/api/v1/jobs/{job.pk}/notification-rule/").json()["source"] == "project"
    assert other_api.get(f"/api/v1/jobs/{job.pk}/notification-rule/").status_code == 404
    assert other_api.put(f"/api/v1/projects/{tenant.project.pk}/notification-rule/", {},
                         format="json").status_code == 404
    viewer = member(tenant, Membership.Role.VIEWER)
    assert viewer.get(f"/api/v1/jobs/{job.pk}/notification-rule/").status_code == 200
    assert viewer.put(f"/api/v1/jobs/{job.pk}/notification-rule/", {}, format="json").status_code == 403


NOTIFICATION_PATHS = {
    "/api/v1/channels/", "/api/v1/channels/{id}/", "/api/v1/channels/{id}/test/", "/api/v1/notifications/",
    "/api/v1/notifications/{id}/", "/api/v1/event-subscriptions/", "/api/v1/event-subscriptions/{id}/",
    "/api/v1/jobs/{id}/notification-rule/", "/api/v1/projects/{id}/notification-rule/",
}


def test_the_schema_documents_the_endpoints():
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)
    assert NOTIFICATION_PATHS <= set(schema["paths"])
    test = schema["paths"]["/api/v1/channels/{id}/test/"]["post"]
    assert "200" in test["responses"]
