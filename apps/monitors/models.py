"""Heartbeat monitors (dead-man's switches): the customer's own job pings us; silence past
the expected time plus a grace period turns the monitor down.

``deadline_at`` (expected ping + grace) is a column with a partial index, so the
scheduler asks the database "which monitors are overdue?" instead of doing schedule math
on every monitor each tick (apps.monitors.clock).
"""

import secrets

from django.db import models
from django.db.models import Q
from django.utils.timezone import now

from apps.accounts.tenancy import tenant_manager
from cronsvc.ids import uuid7

#: the first bytes of a ping's body that are kept
BODY_LIMIT = 10 * 1024


def new_ping_id():
    # 16 random bytes: 22 URL-safe characters, the only credential of a ping URL.
    return secrets.token_urlsafe(16)


class Monitor(models.Model):
    class ScheduleType(models.TextChoices):
        CRON = "cron", "Cron expression"
        INTERVAL = "interval", "Every N seconds"

    class State(models.TextChoices):
        NEW = "new", "New (no ping yet)"
        UP = "up", "Up"
        LATE = "late", "Late (within the grace period)"
        DOWN = "down", "Down"
        PAUSED = "paused", "Paused"

    #: The states the scheduler turns down once ``deadline_at`` passes. A new monitor has a
    #: deadline only after a /start: start + grace, within which the run must end (as
    #: Healthchecks does), else it goes down although it never had a success.
    CAN_GO_DOWN = ("new", "up", "late")

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="monitors", db_index=False)
    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="monitors",
                                     db_index=False)
    name = models.CharField(max_length=200)
    schedule_type = models.CharField(max_length=10, choices=ScheduleType.choices, default=ScheduleType.INTERVAL)
    cron_expression = models.CharField(max_length=200, blank=True)
    interval_seconds = models.PositiveIntegerField(null=True, blank=True)
    timezone = models.CharField(max_length=64, default="UTC")
    grace_seconds = models.PositiveIntegerField(default=3600)
    ping_id = models.CharField(max_length=64, unique=True, default=new_ping_id, editable=False)
    badge_token = models.CharField(max_length=64, unique=True, null=True, blank=True, editable=False)

    state = models.CharField(max_length=8, choices=State.choices, default=State.NEW)
    last_ping_at = models.DateTimeField(null=True, blank=True)
    last_ping_kind = models.CharField(max_length=8, blank=True)
    last_start_at = models.DateTimeField(null=True, blank=True)
    last_duration_ms = models.PositiveIntegerField(null=True, blank=True)
    next_expected_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField(null=True, blank=True, help_text="next_expected_at + grace: down after it.")
    state_changed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=now)
    updated_at = models.DateTimeField(auto_now=True)

    objects = tenant_manager("organization")

    class Meta:
        ordering = ["name"]
        indexes = [
            models.Index(fields=["deadline_at"], name="monitor_overdue",
                         condition=Q(state__in=["new", "up", "late"], deadline_at__isnull=False)),
            models.Index(fields=["next_expected_at"], name="monitor_late",
                         condition=Q(state="up", next_expected_at__isnull=False)),
            models.Index(fields=["project", "name"], name="monitor_project_name"),
            models.Index(fields=["organization", "name"], name="monitor_org_name"),
        ]

    def __str__(self):
        return self.name


class Ping(models.Model):
    class Kind(models.TextChoices):
        SUCCESS = "success", "Success"
        START = "start", "Start"
        FAIL = "fail", "Failure"

    id = models.BigAutoField(primary_key=True)
    monitor = models.ForeignKey(Monitor, on_delete=models.CASCADE, related_name="pings", db_index=False)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    exit_code = models.IntegerField(null=True, blank=True)
    rid = models.CharField(max_length=64, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    method = models.CharField(max_length=8)
    remote_addr = models.CharField(max_length=64, blank=True)
    user_agent = models.CharField(max_length=200, blank=True)
    body = models.TextField(blank=True)
    created_at = models.DateTimeField(default=now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["monitor", "-created_at", "-id"], name="ping_monitor_latest"),
            models.Index(fields=["monitor", "rid"], name="ping_start_rid", condition=Q(kind="start") & ~Q(rid="")),
        ]

    def __str__(self):
        return f"{self.kind} ping of {self.monitor_id} at {self.created_at}"
