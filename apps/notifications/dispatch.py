"""Recording notifications and sending them after commit.

Callers (the outcome hook, billing's quota warnings, the periodic watch) only write rows;
``transaction.on_commit`` hands their ids to a task, so nothing leaves the process before
the facts it reports are committed, and a rolled-back transaction sends nothing. A lost
hand-off (broker down) is caught by the periodic resend of pending rows.
"""

from __future__ import annotations

import logging

from celery import current_app
from django.db import transaction

from .models import Channel, Notification

log = logging.getLogger(__name__)


def notify_organization(organization_id, kind, subject, text, data=None):
    """Tell an organization something (e.g. billing's quota warnings, ``kind="quota"``):
    an e-mail to its owners, and a message to every enabled channel of its projects that
    accepts ``kind``. Safe inside a transaction: rows are recorded now, sent after commit.
    Returns the Notification rows."""
    owners = owner_addresses(organization_id)
    rows = []
    if owners:
        rows.append(Notification(organization_id=organization_id, recipients=owners, event=kind,
                                 subject=subject, text=text, data=data or {}))
    channels = Channel.objects.filter(organization_id=organization_id, enabled=True).select_related("project")
    for channel in channels:
        if channel.accepts(kind):
            rows.append(Notification(organization_id=organization_id, project_id=channel.project_id,
                                     channel=channel, channel_name=channel.name, event=kind,
                                     subject=subject, text=text, data=data or {}))
    return queue_notifications(rows)


def owner_addresses(organization_id):
    """The e-mail addresses of the organization's owners, sorted."""
    from apps.accounts.models import Membership

    return sorted(Membership.objects.filter(organization_id=organization_id, role=Membership.Role.OWNER)
                  .values_list("user__email", flat=True))


def mail_configured():
    """Whether e-mail leaves this server (settings.MAIL_CONFIGURED): only then do a job's
    failures reach its organization's owners when its project has no channel."""
    from django.conf import settings

    return settings.MAIL_CONFIGURED


def unheard_projects(projects):
    """Those of ``projects`` with no enabled channel: their jobs' failures reach the
    organization's owners by e-mail when mail is configured, and nobody otherwise."""
    projects = list(projects)
    heard = set(Channel.objects.filter(project__in=projects, enabled=True).values_list("project_id", flat=True))
    return [project for project in projects if project.pk not in heard]


def queue_notifications(rows):
    """Store unsaved Notification rows and send them once the transaction commits."""
    if not rows:
        return []
    Notification.objects.bulk_create(rows)
    ids = [str(row.id) for row in rows]
    transaction.on_commit(lambda: _enqueue("apps.notifications.tasks.send_notifications", ids))
    return rows


def queue_events(rows):
    """Store unsaved OutboxEvent rows and send them once the transaction commits."""
    from .models import OutboxEvent

    if not rows:
        return []
    OutboxEvent.objects.bulk_create(rows)
    ids = [str(row.id) for row in rows]
    transaction.on_commit(lambda: _enqueue("apps.notifications.tasks.send_events", ids))
    return rows


def _enqueue(task_name, ids):
    from django.conf import settings

    try:
        current_app.send_task(task_name, args=[ids], queue=settings.NOTIFICATION_QUEUE)
    except Exception as exc:  # the periodic resend picks them up: never fail the caller's commit
        log.warning("could not enqueue %s for %d rows: %s", task_name, len(ids), exc)


__all__ = ["notify_organization", "owner_addresses", "mail_configured", "unheard_projects", "queue_notifications", "queue_events"]
