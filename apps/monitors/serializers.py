"""The monitor's API shape: the job's schedule input (apps.jobs.schedule_serializers.ScheduleField,
cron or interval only) plus a grace period; state and ping URLs are read-only."""

from django.conf import settings
from django.urls import reverse
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from apps.api.base import StrictModelSerializer
from apps.jobs.schedule_serializers import ScheduleField
from apps.jobs.serializers import DefaultProject, ProjectField
from apps.projects.models import Project

from .models import Monitor, Ping
from .schedule import describe_monitor

MAX_GRACE = 31 * 86400


class MonitorScheduleField(ScheduleField):
    """Cron or interval, in a timezone (validated by cronsvc.schedules like a job's)."""

    def to_representation(self, monitor):
        if monitor.schedule_type == Monitor.ScheduleType.CRON:
            return {"type": "cron", "expression": monitor.cron_expression, "timezone": monitor.timezone}
        return {"type": "interval", "seconds": monitor.interval_seconds, "timezone": monitor.timezone}

    def to_internal_value(self, data):
        fields = super().to_internal_value(data)
        if fields["schedule_type"] not in Monitor.ScheduleType.values:
            raise serializers.ValidationError({"type": [ErrorDetail(
                "A monitor's schedule is cron or interval.", code="invalid_schedule")]})
        fields.pop("run_at", None)
        return fields


def ping_url(monitor):
    return settings.SITE_URL + reverse("monitor-ping", args=[monitor.ping_id])


class MonitorSerializer(StrictModelSerializer):
    project = ProjectField(queryset=Project.objects.none(), default=DefaultProject(),
                           help_text="Optional when you reach one project.")
    schedule = MonitorScheduleField(source="*")
    grace_seconds = serializers.IntegerField(min_value=1, max_value=MAX_GRACE, default=3600,
                                             help_text="How long after the expected ping the monitor goes down.")
    schedule_description = serializers.SerializerMethodField()
    ping_url = serializers.SerializerMethodField(help_text="GET or POST it; /start, /fail or /<exit code> after it.")

    class Meta:
        model = Monitor
        fields = ["id", "project", "name", "schedule", "schedule_description", "grace_seconds", "state", "ping_url",
                  "last_ping_at", "last_ping_kind", "last_duration_ms", "next_expected_at", "deadline_at",
                  "state_changed_at", "created_at", "updated_at"]
        read_only_fields = ["id", "state", "last_ping_at", "last_ping_kind", "last_duration_ms", "next_expected_at",
                            "deadline_at", "state_changed_at", "created_at", "updated_at"]

    def get_schedule_description(self, monitor) -> str:
        return describe_monitor(monitor)

    def get_ping_url(self, monitor) -> str:
        return ping_url(monitor)

    def validate(self, attrs):
        if attrs.get("timezone", "") is None:  # no timezone given: the project's
            project = attrs.get("project") or (self.instance.project if self.instance else None)
            attrs["timezone"] = getattr(project, "timezone", None) or "UTC"
        return attrs


class PingSerializer(serializers.ModelSerializer):
    class Meta:
        model = Ping
        fields = ["id", "kind", "exit_code", "rid", "duration_ms", "method", "remote_addr", "user_agent", "body",
                  "created_at"]
        read_only_fields = fields
