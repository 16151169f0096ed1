"""A monitor's state change, told through the project's notification channels.

Down (a fail ping, or silence past the grace period) sends one ``failure`` notification;
the next success after it sends one ``recovery`` notification when the project's rule
wants recoveries. Other changes (new -> up, up -> late, late -> up) notify nobody. The
rows are written in the transaction that changed the state (apps.notifications.dispatch
sends them after commit), so a change is notified exactly once, however many schedulers
or web processes saw it. Changes come here through apps.monitors.changes.
"""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings
from django.urls import reverse

from apps.notifications.dispatch import queue_notifications
from apps.notifications.models import Channel, Event, Notification, NotificationRule

from .models import Monitor
from .schedule import describe_monitor

DOWN, UP = Monitor.State.DOWN, Monitor.State.UP
SUBJECTS = {Event.FAILURE: "Monitor down: {name}", Event.RECOVERY: "Monitor up again: {name}"}
_PLACEHOLDER = "00000000-0000-0000-0000-000000000000"


def event_for(old_state, new_state):
    """The notification a change calls for, or None."""
    if new_state == DOWN and old_state != DOWN:
        return Event.FAILURE
    if old_state == DOWN and new_state == UP:
        return Event.RECOVERY
    return None


def notify(event, monitors, now, *, detail=""):
    """Queue ``event`` about each monitor to its project's channels; returns the rows."""
    project_ids = {monitor.project_id for monitor in monitors}
    channels = {}
    for channel in Channel.objects.filter(project_id__in=project_ids, enabled=True):
        if channel.accepts(event):
            channels.setdefault(channel.project_id, []).append(channel)
    if not channels:
        return []
    if event == Event.RECOVERY:
        muted = set(NotificationRule.objects.filter(project_id__in=project_ids, job__isnull=True,
                                                    notify_recovery=False).values_list("project_id", flat=True))
        monitors = [monitor for monitor in monitors if monitor.project_id not in muted]
    rows = []
    for monitor in monitors:
        subject, text, data = message(event, monitor, now, detail=detail)
        rows += [Notification(organization_id=monitor.organization_id, project_id=monitor.project_id,
                              channel=channel, channel_name=channel.name, event=event, subject=subject, text=text,
                              data=data) for channel in channels.get(monitor.project_id, ())]
    return queue_notifications(rows)


@lru_cache(maxsize=1)
def _detail_pattern():
    return reverse("monitors:detail", args=[_PLACEHOLDER])


def monitor_url(monitor_id):
    return settings.SITE_URL + _detail_pattern().replace(_PLACEHOLDER, str(monitor_id))


def _iso(value):
    return value.isoformat() if value else None


def message(event, monitor, now, *, detail=""):
    """(subject, text, evidence) of a notification about ``monitor``."""
    data = {
        "monitor": {"id": str(monitor.id), "name": monitor.name, "schedule": describe_monitor(monitor),
                    "grace_seconds": monitor.grace_seconds, "state": monitor.state,
                    "last_ping_at": _iso(monitor.last_ping_at), "last_ping_kind": monitor.last_ping_kind,
                    "next_expected_at": _iso(monitor.next_expected_at), "url": monitor_url(monitor.id)},
        "project": {"id": str(monitor.project_id), "name": monitor.project.name},
        "at": now.isoformat(),
    }
    if detail:
        data["detail"] = detail
    subject = SUBJECTS[event].format(name=monitor.name)
    info = data["monitor"]
    lines = [subject, ""] + ([detail, ""] if detail else []) + [
        f"Monitor: {monitor.name} (project {monitor.project.name})",
        f"Schedule: {info['schedule']}, grace {monitor.grace_seconds} s",
        f"Last ping: {info['last_ping_at'] or 'never'}" + (f" ({monitor.last_ping_kind})" if monitor.last_ping_kind
                                                           else ""),
        f"Details: {info['url']}",
    ]
    return subject, "\n".join(lines), data
