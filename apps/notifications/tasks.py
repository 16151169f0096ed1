"""Celery tasks: send recorded notifications and events; the periodic watch."""

from celery import shared_task

from . import sending


@shared_task(name="apps.notifications.tasks.send_notifications", acks_late=True, ignore_result=True)
def send_notifications(ids):
    for row_id in ids:
        sending.deliver_notification(row_id)


@shared_task(name="apps.notifications.tasks.send_events", acks_late=True, ignore_result=True)
def send_events(ids):
    for row_id in ids:
        sending.deliver_event(row_id)


@shared_task(name="apps.notifications.tasks.watch", ignore_result=True)
def watch():
    """Late and long-running runs, reminders, and the resend of due rows (periodic)."""
    from .watch import watch_once

    watch_once()
