"""What the API and the pages do to channels, rules and subscriptions: one code path, so
both enforce the same checks. Callers check the role and scope the objects (tenancy)."""

from __future__ import annotations

from django.utils import timezone

from apps.accounts.audit import audited
from cronsvc.notify.formats import alert_message

from .models import ALL_EVENTS, Event, EventSubscription, Notification, NotificationRule
from .rules import RULE_FIELDS
from .senders import SendError, send_notification
from .validation import ConfigError, check_url, clean_config

SUBSCRIPTION_TYPES = list(EventSubscription.Type.values)
MAX_RULE_SECONDS = 7 * 24 * 3600


def clean_events(events):
    events = list(events) if events else list(ALL_EVENTS)
    bad = sorted(set(events) - set(ALL_EVENTS))
    if bad:
        raise ConfigError("events", "invalid_choice", f"Unknown event {bad[0]!r}; use some of {ALL_EVENTS}.")
    return events


@audited
def save_channel(channel, *, kind=None, name=None, config=None, events=None, enabled=None, asked=None, audit):
    """Create (unsaved ``channel`` with project set) or update a channel. Its update event names
    the fields ``asked`` (the API's request) when given, else the channel's name and kind."""
    adding = channel._state.adding
    if kind is not None and channel.pk and kind != channel.kind and not channel._state.adding:
        raise ConfigError("kind", "immutable", "A channel's kind cannot change; create another channel.")
    if kind is not None:
        channel.kind = kind
    if name is not None:
        channel.name = name.strip() or channel.kind
    if config is not None or channel._state.adding:
        previous = None if channel._state.adding else channel.config
        channel.config = clean_config(channel.kind, config or {}, previous)
    if events is not None:
        channel.events = clean_events(events)
    if enabled is not None:
        channel.enabled = enabled
    channel.organization_id = channel.project.organization_id
    channel.save()
    named = {"name": channel.name, "kind": channel.kind}
    if adding:
        audit("channel.create", channel, named)
    else:
        audit("channel.update", channel, named if asked is None else {"fields": asked})
    return channel


@audited
def delete_channel(channel, *, audit):
    audit("channel.delete", channel, {"name": channel.name, "kind": channel.kind})  # first: it names what goes
    channel.delete()


def test_channel(channel, *, now=None):
    """Send a test message now and record it in the log: (status, detail)."""
    now = now or timezone.now()
    data = {"job": {"name": "Example job", "schedule": "every minute"}, "project": {"name": channel.project.name},
            "detail": "This is a test message: your channel works."}
    subject, text = alert_message("test", data)
    row = Notification(organization_id=channel.organization_id, project_id=channel.project_id, channel=channel,
                       channel_name=channel.name, event=Event.TEST, subject=subject, text=text, data=data,
                       attempts=1)
    try:
        detail = send_notification(row, channel, now=now)
    except SendError as exc:
        row.status, row.last_error, detail = Notification.Status.FAILED, str(exc)[:2000], str(exc)
    else:
        row.status, row.sent_at = Notification.Status.SENT, timezone.now()
    row.save()
    return row.status, detail


def clean_rule(values):
    cleaned = {}
    for name in RULE_FIELDS:
        if name not in values:
            continue
        value = values[name]
        if name.startswith("notify_"):
            cleaned[name] = bool(value)
        elif name == "failure_threshold":
            cleaned[name] = _int(name, value, 1, 1000)
        elif value in (None, ""):
            cleaned[name] = None
        elif name == "reminder_hours":
            cleaned[name] = _int(name, value, 1, 24 * 30)
        else:
            cleaned[name] = _int(name, value, 1, MAX_RULE_SECONDS)
    return cleaned


def _int(name, value, low, high):
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(name, "invalid", f"{name} must be a whole number.") from None
    if isinstance(value, bool) or not low <= number <= high:
        raise ConfigError(name, "out_of_range", f"{name} must be between {low} and {high}.")
    return number


@audited
def set_rule(project, job=None, values=None, *, now=None, reported=None, audit):
    """The project's default rule (``job`` None) or the job's own, created or updated. A
    late threshold set or changed judges only the runs scheduled from ``now`` on. Its audit
    event's data is ``reported`` (the API reports the values asked, the pages the fields)."""
    values = clean_rule(values or {})
    rule = NotificationRule.objects.select_for_update().filter(project=project, job=job).first()
    if rule is None:
        rule = NotificationRule(project=project, job=job, organization_id=project.organization_id)
    if values.get("late_after_seconds") and values["late_after_seconds"] != rule.late_after_seconds:
        rule.late_since = now or timezone.now()
    for name, value in values.items():
        setattr(rule, name, value)
    rule.save()
    audit("notification_rule.update", job or project, reported)
    return rule


@audited
def clear_job_rule(job, *, audit):
    """The job follows its project's rule again; True if it had one of its own."""
    cleared = NotificationRule.objects.filter(job=job).delete()[0] > 0
    if cleared:
        audit("notification_rule.delete", job)
    return cleared


def rule_view(project, job=None):
    """(source, rule or None): what applies to the job (or project): job | project | default."""
    if job is not None:
        own = NotificationRule.objects.filter(job=job).first()
        if own:
            return "job", own
    default = NotificationRule.objects.filter(project=project, job__isnull=True).first()
    return ("project", default) if default else ("default", None)


def clean_event_types(types):
    types = list(types or [])
    bad = sorted(set(types) - set(SUBSCRIPTION_TYPES))
    if bad:
        raise ConfigError("event_types", "invalid_choice",
                          f"Unknown event type {bad[0]!r}; use some of {SUBSCRIPTION_TYPES}.")
    return types


@audited
def save_subscription(subscription, *, url=None, event_types=None, enabled=None, audit):
    """Create (unsaved ``subscription`` with project set) or update an event subscription."""
    adding = subscription._state.adding
    if url is not None:
        subscription.url = check_url(url, "url")
    elif subscription._state.adding:
        raise ConfigError("url", "required", "Give the URL to post events to.")
    if event_types is not None:
        subscription.event_types = clean_event_types(event_types)
    if enabled is not None:
        subscription.enabled = enabled
    subscription.organization_id = subscription.project.organization_id
    subscription.save()
    audit("event_subscription.create" if adding else "event_subscription.update", subscription,
          {"event_types": subscription.event_types})
    return subscription


@audited
def delete_subscription(subscription, *, audit):
    audit("event_subscription.delete", subscription)  # first: it names what goes
    subscription.delete()

