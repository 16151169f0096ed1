"""Sending after commit: channel formats on the wire, signatures, retries, the log."""

import json
from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone
from standardwebhooks import Webhook

from apps.notifications.dispatch import notify_organization
from apps.notifications.models import Notification
from apps.notifications.sending import deliver_notification
from apps.notifications.services import test_channel as send_test

from .conftest import queued, run


def failure_row(tenant, make_job, target):
    job = make_job(tenant, url=target.url("/status/500"), max_attempts=1)
    run(queued(job))
    return Notification.objects.get(job=job)


def test_slack_channel_posts_the_alert(tenant, make_channel, make_job, target):
    make_channel(tenant, "slack", url=target.url("/slack"))
    row = failure_row(tenant, make_job, target)
    assert deliver_notification(row.id) == "sent"
    (received,) = target.requests_to("/slack")
    body = json.loads(received.body)
    assert body["text"].startswith("Job failing") and "HTTP status: 500" in body["blocks"][0]["text"]["text"]
    row.refresh_from_db()
    assert row.status == "sent" and row.attempts == 1 and row.sent_at


def test_a_row_is_sent_once_even_when_handed_over_twice(tenant, make_channel, make_job, target):
    make_channel(tenant, "discord", url=target.url("/discord"))
    row = failure_row(tenant, make_job, target)
    assert deliver_notification(row.id) == "sent"
    assert deliver_notification(row.id) is None
    assert len(target.requests_to("/discord")) == 1
    assert "embeds" in json.loads(target.requests_to("/discord")[0].body)


def test_webhook_channel_is_signed_with_standard_webhooks(tenant, make_channel, make_job, target):
    channel = make_channel(tenant, "webhook", url=target.url("/hook"))
    row = failure_row(tenant, make_job, target)
    deliver_notification(row.id)
    (received,) = target.requests_to("/hook")
    payload = Webhook(channel.config["secret"]).verify(received.body, received.headers)
    assert payload["type"] == "notification.failure" and payload["data"]["execution"]["id"] == str(row.execution_id)


def test_telegram_goes_to_the_bot_api(tenant, make_channel, make_job, target, settings):
    settings.TELEGRAM_API_URL = target.url("/tg")
    make_channel(tenant, "telegram", bot_token="123456:" + "A" * 30, chat_id="-1001")
    row = failure_row(tenant, make_job, target)
    assert deliver_notification(row.id) == "sent"
    (received,) = target.requests_to("/tg/bot123456:")
    assert received.path.endswith("/sendMessage") and json.loads(received.body)["chat_id"] == "-1001"


def test_email_channel(tenant, make_channel, make_job, target):
    make_channel(tenant, "email", to=["ops@example.com", "dev@example.com"])
    row = failure_row(tenant, make_job, target)
    assert deliver_notification(row.id) == "sent"
    (message,) = mail.outbox
    assert message.to == ["ops@example.com", "dev@example.com"] and message.subject == row.subject
    assert row.data["execution"]["url"] in message.body


def test_a_failing_channel_is_retried_with_backoff_then_sent(tenant, make_channel, make_job, target):
    make_channel(tenant, "slack", url=target.url("/flaky?key=retry&fail=1"))
    row = failure_row(tenant, make_job, target)
    now = timezone.now()
    assert deliver_notification(row.id, now=now) == "pending"
    row.refresh_from_db()
    assert row.attempts == 1 and "HTTP 503" in row.last_error
    assert row.next_attempt_at == now + timedelta(seconds=30)
    assert deliver_notification(row.id, now=now + timedelta(seconds=29)) is None  # not due yet
    assert deliver_notification(row.id, now=now + timedelta(seconds=31)) == "sent"
    row.refresh_from_db()
    assert row.status == "sent" and row.attempts == 2 and row.last_error == ""
    assert len(target.requests_to("/flaky")) == 2


def test_a_broken_channel_gives_up_after_the_last_attempt(tenant, make_channel, make_job, target):
    make_channel(tenant, "slack", url=target.url("/status/404"))
    row = failure_row(tenant, make_job, target)
    now = timezone.now()
    statuses = [deliver_notification(row.id, now=now + timedelta(hours=i)) for i in range(4)]
    assert statuses == ["pending", "pending", "failed", None]
    row.refresh_from_db()
    assert row.status == "failed" and row.attempts == 3 and "HTTP 404" in row.last_error


def test_an_unreachable_channel_does_not_block_runs(tenant, make_channel, make_job, target):
    make_channel(tenant, "slack", url="http://127.0.0.1:1025/closed")
    job = make_job(tenant, url=target.url("/status/500"), max_attempts=1)
    (execution,) = run(queued(job))
    assert execution.status == "dead"  # recorded whatever the channel does
    row = Notification.objects.get(job=job)
    assert deliver_notification(row.id) == "pending"
    row.refresh_from_db()
    assert row.last_error.startswith("connect_error")


def test_test_button_sends_and_records(tenant, make_channel, target):
    good = make_channel(tenant, "slack", url=target.url("/ok"))
    bad = make_channel(tenant, "slack", url=target.url("/status/500"))
    assert send_test(good)[0] == "sent"
    status, detail = send_test(bad)
    assert status == "failed" and "HTTP 500" in detail
    log = {row.channel_id: row for row in Notification.objects.filter(event="test")}
    assert log[good.id].status == "sent" and log[bad.id].status == "failed"


@pytest.mark.django_db
def test_notify_organization_mails_owners_and_matching_channels(tenant, make_channel, django_capture_on_commit_callbacks):
    make_channel(tenant, "slack", url="http://127.0.0.1:1025/q")
    muted = make_channel(tenant, "discord", url="http://127.0.0.1:1025/d")
    muted.events = ["failure"]
    muted.save()
    with django_capture_on_commit_callbacks() as callbacks:
        rows = notify_organization(tenant.organization.id, "quota", "80% of your runs used", "Details…",
                                   {"percent": 80})
    assert len(callbacks) == 1  # handed to the sending task after commit, not before
    assert len(rows) == 2
    owners_mail = next(r for r in rows if r.channel_id is None)
    assert owners_mail.recipients == [tenant.owner.email]
    assert deliver_notification(owners_mail.id) == "sent"
    assert mail.outbox[0].to == [tenant.owner.email] and mail.outbox[0].subject == "80% of your runs used"


def test_errors_in_the_log_do_not_quote_the_secret_path():
    from apps.notifications.senders import _redact

    url = "https://hooks.slack.com/services/T0/B0/secret-token"
    message = "HTTPSConnectionPool(host='hooks.slack.com', port=443): Max retries exceeded with url: " \
              "/services/T0/B0/secret-token (Caused by ...)"
    assert "secret-token" not in _redact(message, url) and "hooks.slack.com" in _redact(message, url)
