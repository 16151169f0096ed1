"""Claim, send, record: the life of a Notification or OutboxEvent row after commit.

A row is claimed with a conditional UPDATE (pending and due -> attempts + 1, due again
after a lease), so a redelivered task message or the periodic resend never sends a row
twice at once; a failed try is recorded and due again after a backoff, until
NOTIFICATION_MAX_ATTEMPTS. Retry timing lives in the database, not in broker countdowns.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import F
from django.utils import timezone

from .models import Notification, OutboxEvent
from .senders import SendError, send_event, send_notification

log = logging.getLogger(__name__)
CLAIM_LEASE = timedelta(minutes=5)
PENDING = Notification.Status.PENDING


def backoff(attempts):
    """Seconds before try ``attempts + 1``: doubling from NOTIFICATION_RETRY_SECONDS."""
    return min(settings.NOTIFICATION_RETRY_SECONDS * 2 ** max(0, attempts - 1), 6 * 3600)


def claim(model, row_id, now):
    return model.objects.filter(id=row_id, status=PENDING, next_attempt_at__lte=now).update(
        attempts=F("attempts") + 1, next_attempt_at=now + CLAIM_LEASE) == 1


def deliver_notification(row_id, *, now=None):
    """Try to send one notification; returns its status afterwards (None if not claimed)."""
    now = now or timezone.now()
    if not claim(Notification, row_id, now):
        return None
    row = Notification.objects.select_related("channel").get(id=row_id)
    if row.channel_id is None and not row.recipients:
        return _settle(Notification, row, now, "channel deleted")
    if row.channel_id is None and _owner_mail_throttled(row.organization_id):
        Notification.objects.filter(id=row.id).update(status=Notification.Status.FAILED, last_error=(
            "Not sent: this organization's owners had MAIL_PER_ORGANIZATION_PER_HOUR e-mails in the last hour. "
            "Add a notification channel to hear about every failing job."))
        return Notification.Status.FAILED
    return _try(Notification, row, now, lambda: send_notification(row, row.channel, now=now))


def deliver_event(row_id, *, now=None):
    now = now or timezone.now()
    if not claim(OutboxEvent, row_id, now):
        return None
    row = OutboxEvent.objects.select_related("subscription").get(id=row_id)
    return _try(OutboxEvent, row, now, lambda: send_event(row, now=now))


OWNER_MAIL = "owner-mail"


def _owner_mail_throttled(organization_id):
    """Counts one e-mail to an organization's owners (alerts of jobs without a channel,
    quota warnings); True when MAIL_PER_ORGANIZATION_PER_HOUR were sent in this hour's
    window (counted apart from the messages sent on request, apps.api.ratelimit)."""
    from apps.api import ratelimit

    sent, _ = ratelimit.count(OWNER_MAIL, str(organization_id), window=ratelimit.SEND_WINDOW)
    if sent >= settings.MAIL_PER_ORGANIZATION_PER_HOUR:
        return True
    ratelimit.hit(OWNER_MAIL, str(organization_id), window=ratelimit.SEND_WINDOW)
    return False


def _try(model, row, now, send):
    try:
        send()
    except SendError as exc:
        return _settle(model, row, now, str(exc))
    except Exception as exc:  # a bug or bad config must be recorded, not lost in a worker log
        log.exception("sending %s %s", model.__name__, row.id)
        return _settle(model, row, now, f"{type(exc).__name__}: {exc}")
    model.objects.filter(id=row.id).update(status=model.Status.SENT, sent_at=timezone.now(), last_error="")
    return model.Status.SENT


def _settle(model, row, now, error):
    if row.attempts >= settings.NOTIFICATION_MAX_ATTEMPTS:
        model.objects.filter(id=row.id).update(status=model.Status.FAILED, last_error=error[:2000])
        return model.Status.FAILED
    model.objects.filter(id=row.id).update(next_attempt_at=now + timedelta(seconds=backoff(row.attempts)),
                                           last_error=error[:2000])
    return PENDING


def due_ids(model, now, *, limit=500):
    """Pending rows whose next try is due (new rows whose hand-off was lost, retries)."""
    return [str(i) for i in model.objects.filter(status=PENDING, next_attempt_at__lte=now)
            .order_by("next_attempt_at").values_list("id", flat=True)[:limit]]
