"""Who hears about a project's runs, when, and what was sent.

``Channel`` and ``EventSubscription`` are where messages go; ``NotificationRule`` says when
(a project's defaults, optionally overridden per job); ``AlertState`` remembers per job
whether a failure was notified, so a job failing every minute alerts once; ``Notification``
and ``OutboxEvent`` are the rows written in the outcome's transaction and sent after commit
by a task (retried, recorded: the per-project notification log).
"""

from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.accounts.encryption import EncryptedJSONField
from apps.accounts.tenancy import tenant_manager
from cronsvc.delivery.signing import generate_secret
from cronsvc.ids import uuid7


class Event(models.TextChoices):
    """What a notification is about."""

    FAILURE = "failure", "Job failing"
    RECOVERY = "recovery", "Job recovered"
    DISABLED = "disabled", "Job disabled automatically"
    LATE = "late", "Run started late"
    LONG_RUNNING = "long_running", "Run takes too long"
    REMINDER = "reminder", "Still failing (reminder)"
    QUOTA = "quota", "Usage quota"
    TEST = "test", "Test message"


ALL_EVENTS = [choice for choice in Event.values if choice != Event.TEST]


def all_events():
    return list(ALL_EVENTS)


class Channel(models.Model):
    class Kind(models.TextChoices):
        EMAIL = "email", "E-mail"
        WEBHOOK = "webhook", "Webhook (JSON, signed)"
        SLACK = "slack", "Slack incoming webhook"
        DISCORD = "discord", "Discord webhook"
        TELEGRAM = "telegram", "Telegram bot"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="notification_channels")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    name = models.CharField(max_length=120)
    # Addresses, URLs, bot tokens and the webhook signing secret: all secrets.
    config = EncryptedJSONField(default=dict)
    events = models.JSONField(default=all_events, blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = tenant_manager("organization")

    class Meta:
        ordering = ["project", "name"]
        indexes = [models.Index(fields=["project"], name="channel_project", condition=Q(enabled=True))]

    def __str__(self):
        return f"{self.name} ({self.kind})"

    def accepts(self, event):
        return event == Event.TEST or not self.events or event in self.events


class NotificationRule(models.Model):
    """When to notify: a project's defaults (``job`` empty) or one job's own rule."""

    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="notification_rules")
    job = models.OneToOneField("jobs.Job", null=True, blank=True, on_delete=models.CASCADE,
                               related_name="notification_rule")
    failure_threshold = models.PositiveIntegerField(default=1)
    notify_recovery = models.BooleanField(default=True)
    notify_disabled = models.BooleanField(default=True)
    late_after_seconds = models.PositiveIntegerField(null=True, blank=True)
    long_running_seconds = models.PositiveIntegerField(null=True, blank=True)
    reminder_hours = models.PositiveIntegerField(null=True, blank=True)
    # When ``late_after_seconds`` was last set or changed: a late rule judges only the runs
    # scheduled after it (a new rule does not alert about the past). Set by services.set_rule.
    late_since = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = tenant_manager("organization")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["project"], condition=Q(job__isnull=True),
                                    name="notification_rule_one_default_per_project"),
        ]
        indexes = [
            models.Index(fields=["project"], name="rule_watch_runs",
                         condition=Q(late_after_seconds__isnull=False) | Q(long_running_seconds__isnull=False)),
        ]


class AlertState(models.Model):
    """Per job: is a failure notified and still open? Flipped with conditional UPDATEs in
    the outcome's transaction, so concurrent workers send one alert per state change."""

    job = models.OneToOneField("jobs.Job", primary_key=True, on_delete=models.CASCADE, related_name="+")
    failure_notified = models.BooleanField(default=False)
    notified_at = models.DateTimeField(null=True, blank=True)
    last_reminder_at = models.DateTimeField(null=True, blank=True)
    disabled_notified = models.BooleanField(default=False)
    # Late runs (apps.notifications.watch): one alert per episode. ``late_open``: a late run
    # was alerted about and no run started on time since; ``late_checked_until``: the
    # ``scheduled_for`` of the last run judged, so each run is judged once.
    late_open = models.BooleanField(default=False, db_default=False)
    late_checked_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["last_reminder_at"], name="alert_open_failures",
                                condition=Q(failure_notified=True))]


class RunAlert(models.Model):
    """A late or long-running alert already decided for an execution (once each)."""

    execution_id = models.UUIDField()
    kind = models.CharField(max_length=16)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["execution_id", "kind"], name="run_alert_once")]


class Outgoing(models.Model):
    """A message sent after commit by a task, retried with backoff, recorded."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="+")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    # When the next try may start; also the claim's lease while a try is under way.
    next_attempt_at = models.DateTimeField(default=timezone.now)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)

    objects = tenant_manager("organization")

    class Meta:
        abstract = True


class Notification(Outgoing):
    """One message to one channel (or, without a channel, an e-mail to ``recipients``)."""

    project = models.ForeignKey("projects.Project", null=True, blank=True, on_delete=models.CASCADE,
                                related_name="notifications")
    channel = models.ForeignKey(Channel, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    channel_name = models.CharField(max_length=120, blank=True)
    recipients = models.JSONField(default=list, blank=True)
    event = models.CharField(max_length=16, choices=Event.choices)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    execution_id = models.UUIDField(null=True, blank=True)
    subject = models.CharField(max_length=300)
    text = models.TextField()
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["organization", "-created_at"], name="notification_org_latest"),
            models.Index(fields=["project", "-created_at"], name="notification_project_latest"),
            models.Index(fields=["next_attempt_at"], name="notification_pending",
                         condition=Q(status="pending")),
        ]


def new_subscription_secret():
    return generate_secret()


class EventSubscription(models.Model):
    """An endpoint that receives a project's execution events, signed (Standard Webhooks)."""

    class Type(models.TextChoices):
        SUCCEEDED = "job.execution.succeeded", "job.execution.succeeded"
        FAILED = "job.execution.failed", "job.execution.failed"
        DEAD = "job.execution.dead", "job.execution.dead"
        DISABLED = "job.disabled", "job.disabled"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="event_subscriptions")
    url = EncryptedJSONField()
    event_types = models.JSONField(default=list, blank=True)
    secret = EncryptedJSONField(default=new_subscription_secret)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = tenant_manager("organization")

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["project"], name="subscription_project", condition=Q(enabled=True))]

    def accepts(self, event_type):
        return not self.event_types or event_type in self.event_types


class OutboxEvent(Outgoing):
    """One event for one subscription, written in the outcome's transaction."""

    subscription = models.ForeignKey(EventSubscription, on_delete=models.CASCADE, related_name="outbox")
    type = models.CharField(max_length=40)
    execution_id = models.UUIDField(null=True, blank=True)
    payload = models.JSONField()

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["next_attempt_at"], name="outbox_pending", condition=Q(status="pending")),
            models.Index(fields=["subscription", "-created_at"], name="outbox_subscription_latest"),
        ]
