"""Sending one message to one channel or subscription. Raises ``SendError`` on failure.

HTTP goes through the engine's delivery loop with the platform's outbound address
policy (the one runs use), so a channel URL can no more reach a private address than a
job can. Webhook channels and event subscriptions are signed with Standard Webhooks.
"""

from __future__ import annotations

import json
import time
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import EmailMessage

from cronsvc.delivery.request import PreparedDelivery
from cronsvc.delivery.signing import signature_headers
from cronsvc.notify import formats

USER_AGENT = "cronsvc-notifications/1"


class SendError(Exception):
    pass


def send_notification(notification, channel, *, now):
    """Send ``notification`` through ``channel`` (None: e-mail to its recipients)."""
    if channel is None:
        return send_email(notification.recipients, notification.subject, notification.text)
    config = channel.config or {}
    kind = channel.kind
    if kind == "email":
        return send_email(config.get("to") or [], notification.subject, notification.text)
    if kind == "slack":
        return post_json(config["url"], formats.slack_payload(notification.subject, notification.text))
    if kind == "discord":
        return post_json(config["url"], formats.discord_payload(notification.subject, notification.text))
    if kind == "telegram":
        url = formats.telegram_url(config["bot_token"], settings.TELEGRAM_API_URL)
        return post_json(url, formats.telegram_payload(config["chat_id"], notification.text))
    if kind == "webhook":
        payload = formats.webhook_payload(notification.event, notification.subject, notification.text,
                                          notification.data, now.isoformat())
        return post_json(config["url"], payload, secret=config.get("secret"), msg_id=f"msg_{notification.id}")
    raise SendError(f"unknown channel kind {kind!r}")


def send_event(event, *, now):
    subscription = event.subscription
    return post_json(subscription.url, event.payload, secret=subscription.secret, msg_id=f"evt_{event.id}")


def send_email(recipients, subject, text):
    if not recipients:
        raise SendError("no recipient address")
    try:
        EmailMessage(subject=subject, body=text, to=list(recipients)).send()
    except Exception as exc:  # SMTP and socket errors: recorded on the row, retried
        raise SendError(f"e-mail: {exc}") from exc
    return "sent"


def post_json(url, payload, *, secret=None, msg_id=None):
    from apps.executions.worker.outbound import send

    body = json.dumps(payload, separators=(",", ":"), default=str).encode()
    headers = {"Content-Type": "application/json", "User-Agent": USER_AGENT}
    if secret:
        headers.update(signature_headers([secret], msg_id, int(time.time()), body))
    prepared = PreparedDelivery(method="POST", url=url, headers=headers, body=body, connect_timeout=5.0,
                                timeout=settings.NOTIFICATION_TIMEOUT_SECONDS, follow_redirects=False,
                                max_redirects=0)
    result = send(prepared, max_body_bytes=2048)
    if result.error_kind:
        raise SendError(f"{result.error_kind}: {_redact(result.error_message or '', url)}")
    if not 200 <= (result.status_code or 0) < 300:
        raise SendError(f"HTTP {result.status_code}: {formats.excerpt(result.body_excerpt, 200)}")
    return f"HTTP {result.status_code}"


def _redact(message, url):
    """Error texts may quote the URL, whose path holds the secret (Slack and Discord
    webhook tokens, Telegram bot tokens): the log shows them to every member."""
    parts = urlsplit(url)
    secret = parts.path + (f"?{parts.query}" if parts.query else "")
    return message.replace(secret, "/…") if len(secret) > 1 else message
