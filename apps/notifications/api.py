"""/api/v1/channels/, /api/v1/notifications/ (the log), /api/v1/event-subscriptions/, and
the notification rules of a project or a job. Secrets (URLs, tokens, signing secrets) are
shown in full once, in the answer to the create, and masked afterwards."""

from __future__ import annotations

from django_filters import rest_framework as df
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ErrorDetail, ValidationError
from rest_framework.generics import get_object_or_404
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts.audit import no_audit
from apps.api import ratelimit
from apps.api.base import ApiViewMixin, StrictModelSerializer, StrictSerializer
from apps.api.filters import FilterBackend
from apps.api.pagination import NewestFirstCursorPagination
from apps.jobs.models import Job
from apps.jobs.serializers import ProjectField
from apps.projects.models import Project

from . import services
from .models import ALL_EVENTS, Channel, EventSubscription, Notification
from .rules import RULE_FIELDS, as_effective
from .validation import ConfigError, masked_config, mask


def invalid(error: ConfigError):
    return ValidationError({error.field: [ErrorDetail(error.message, code=error.code)]})


# --- channels -----------------------------------------------------------------------------


class ChannelSerializer(StrictModelSerializer):
    project = ProjectField(queryset=Project.objects.none())
    config = serializers.JSONField(
        help_text="email: {to: [addresses]}; webhook: {url, secret?}; slack/discord: {url}; "
                  "telegram: {bot_token, chat_id}. URLs and tokens are masked after saving; on update, "
                  "fields left out keep their value.")
    events = serializers.ListField(child=serializers.ChoiceField(choices=ALL_EVENTS), required=False,
                                   help_text="What this channel hears about (default: everything).")

    class Meta:
        model = Channel
        fields = ["id", "project", "kind", "name", "config", "events", "enabled", "created_at"]
        read_only_fields = ["id", "created_at"]

    def to_representation(self, channel):
        data = super().to_representation(channel)
        data["config"] = masked_config(channel.kind, channel.config)
        if self.context.get("reveal") and channel.kind == "webhook":
            data["signing_secret"] = channel.config.get("secret")  # shown once, on create
        return data

    def save(self, *, audit, asked=None):
        values = dict(self.validated_data)
        channel = self.instance or Channel(project=values["project"])
        if self.instance is not None and "project" in values and values["project"] != channel.project:
            raise ValidationError({"project": [ErrorDetail("A channel cannot move to another project.",
                                                           code="immutable")]})
        try:
            self.instance = services.save_channel(
                channel, kind=values.get("kind"), name=values.get("name"), config=values.get("config"),
                events=values.get("events"), enabled=values.get("enabled"), asked=asked, audit=audit)
        except ConfigError as exc:
            raise invalid(exc) from None
        return self.instance


class TestResultSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=Notification.Status.choices,
                                     help_text="sent or failed (a test is not retried).")
    detail = serializers.CharField()


class ChannelViewSet(ApiViewMixin, viewsets.ModelViewSet):
    queryset = Channel.objects.none()
    serializer_class = ChannelSerializer
    filter_backends = [FilterBackend]
    filterset_fields = ["project", "kind", "enabled"]

    def get_queryset(self):
        channels = Channel.objects.for_organization(self.actor.organization).select_related("project")
        return self.actor.scope_to_projects(channels).order_by("project__name", "name", "id")

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        channel = serializer.save(audit=self.audit)
        data = ChannelSerializer(channel, context={**self.get_serializer_context(), "reveal": True}).data
        return Response(data, status=status.HTTP_201_CREATED)

    def perform_update(self, serializer):
        fields = sorted(serializer.initial_data) if isinstance(serializer.initial_data, dict) else []
        serializer.save(asked=fields, audit=self.audit)

    def perform_destroy(self, channel):
        services.delete_channel(channel, audit=self.audit)

    @extend_schema(request=None, responses=TestResultSerializer,
                   description="Send a test message through the channel now; the result is in the answer "
                               "and in the notification log.")
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        channel = self.get_object()
        wait = ratelimit.send_wait(address=f"channel:{channel.pk}", organization=channel.organization_id)
        if wait is not None:  # per channel and per organization (MAIL_PER_*_PER_HOUR)
            raise exceptions.Throttled(wait=wait, detail="Too many test messages: try again later.")
        result, detail = services.test_channel(channel)
        # A test message changes nothing: a plain event, not an audited change.
        self.audit("channel.test", channel, {"status": result})
        return Response({"status": result, "detail": detail})


# --- the notification log -----------------------------------------------------------------


class NotificationSerializer(serializers.ModelSerializer):
    class Meta:
        model = Notification
        fields = ["id", "project", "channel", "channel_name", "event", "job", "execution_id", "status",
                  "attempts", "last_error", "subject", "text", "data", "created_at", "sent_at", "next_attempt_at"]
        read_only_fields = fields


class NotificationFilter(df.FilterSet):
    class Meta:
        model = Notification
        fields = ["project", "channel", "job", "status", "event"]


class NotificationViewSet(ApiViewMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Notification.objects.none()
    serializer_class = NotificationSerializer
    pagination_class = NewestFirstCursorPagination
    filter_backends = [FilterBackend]
    filterset_class = NotificationFilter

    def get_queryset(self):
        rows = Notification.objects.for_organization(self.actor.organization)
        if self.actor.project_ids is not None:
            rows = rows.filter(project__in=self.actor.project_ids)
        return rows


# --- event subscriptions ------------------------------------------------------------------


class EventSubscriptionSerializer(StrictModelSerializer):
    project = ProjectField(queryset=Project.objects.none())
    url = serializers.CharField(max_length=2048, help_text="Masked after saving.")
    event_types = serializers.ListField(child=serializers.ChoiceField(choices=EventSubscription.Type.values),
                                        required=False, help_text="Default: every event type.")

    class Meta:
        model = EventSubscription
        fields = ["id", "project", "url", "event_types", "enabled", "created_at"]
        read_only_fields = ["id", "created_at"]

    def to_representation(self, subscription):
        data = super().to_representation(subscription)
        data["url"] = mask(subscription.url)
        if self.context.get("reveal"):
            data["signing_secret"] = subscription.secret  # shown once, on create
        return data

    def save(self, **kwargs):
        values = dict(self.validated_data)
        subscription = self.instance or EventSubscription(project=values["project"])
        if self.instance is not None and "project" in values and values["project"] != subscription.project:
            raise ValidationError({"project": [ErrorDetail("A subscription cannot move to another project.",
                                                           code="immutable")]})
        try:
            self.instance = services.save_subscription(subscription, url=values.get("url"),
                                                       event_types=values.get("event_types"),
                                                       enabled=values.get("enabled"),
                                                       audit=kwargs.get("audit", no_audit))
        except ConfigError as exc:
            raise invalid(exc) from None
        return self.instance


class EventSubscriptionViewSet(ApiViewMixin, viewsets.ModelViewSet):
    queryset = EventSubscription.objects.none()
    serializer_class = EventSubscriptionSerializer
    filter_backends = [FilterBackend]
    filterset_fields = ["project", "enabled"]

    def get_queryset(self):
        rows = EventSubscription.objects.for_organization(self.actor.organization).select_related("project")
        return self.actor.scope_to_projects(rows).order_by("-created_at", "id")

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        subscription = serializer.save(audit=self.audit)
        data = EventSubscriptionSerializer(subscription,
                                           context={**self.get_serializer_context(), "reveal": True}).data
        return Response(data, status=status.HTTP_201_CREATED)

    def perform_update(self, serializer):
        serializer.save(audit=self.audit)

    def perform_destroy(self, subscription):
        services.delete_subscription(subscription, audit=self.audit)


# --- rules --------------------------------------------------------------------------------


class RuleSerializer(StrictSerializer):
    failure_threshold = serializers.IntegerField(min_value=1, max_value=1000, required=False,
                                                 help_text="Notify after this many consecutive failed runs.")
    notify_recovery = serializers.BooleanField(required=False,
                                               help_text="Notify when the job succeeds after a notified failure.")
    notify_disabled = serializers.BooleanField(required=False, help_text="Notify when the job is auto-disabled.")
    late_after_seconds = serializers.IntegerField(min_value=1, max_value=services.MAX_RULE_SECONDS,
                                                  allow_null=True, required=False)
    long_running_seconds = serializers.IntegerField(min_value=1, max_value=services.MAX_RULE_SECONDS,
                                                    allow_null=True, required=False)
    reminder_hours = serializers.IntegerField(min_value=1, max_value=720, allow_null=True, required=False)


class RuleOutSerializer(RuleSerializer):
    source = serializers.ChoiceField(choices=["job", "project", "default"], read_only=True,
                                     help_text="Where the rule in force comes from.")


def rule_body(project, job=None):
    source, rule = services.rule_view(project, job)
    effective = as_effective(rule)
    return {"source": source, **{name: getattr(effective, name) for name in RULE_FIELDS}}


class _RuleView(ApiViewMixin, APIView):
    serializer_class = RuleSerializer
    # Treated as a detail route: the object is found (or 404) before the role is checked.
    lookup_url_kwarg = "pk"

    def target(self):
        raise NotImplementedError

    def _apply(self, request, project, job):
        serializer = RuleSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            rule = services.set_rule(project, job, serializer.validated_data,
                                     reported=dict(serializer.validated_data), audit=self.audit)
        except ConfigError as exc:
            raise invalid(exc) from None
        return rule

    @extend_schema(responses=RuleOutSerializer)
    def get(self, request, pk):
        project, job = self.target()
        return Response(rule_body(project, job))

    @extend_schema(request=RuleSerializer, responses=RuleOutSerializer)
    def put(self, request, pk):
        project, job = self.target()
        self._check_write()
        self._apply(request, project, job)
        return Response(rule_body(project, job))

    def _check_write(self):
        from apps.api.actor import Role
        from rest_framework.exceptions import PermissionDenied

        if not self.actor.has_role(Role.DEVELOPER):
            raise PermissionDenied()


class ProjectRuleView(_RuleView):
    """The project's default notification rule (for its jobs without a rule of their own)."""

    def target(self):
        return get_object_or_404(self.actor.projects(), pk=self.kwargs["pk"]), None


class JobRuleView(_RuleView):
    """A job's own notification rule; DELETE goes back to the project's defaults."""

    def target(self):
        jobs = self.actor.scope_to_projects(Job.objects.for_organization(self.actor.organization))
        job = get_object_or_404(jobs.select_related("project"), pk=self.kwargs["pk"])
        return job.project, job

    @extend_schema(request=None, responses={200: RuleOutSerializer})  # a DELETE answers 204 unless told
    def delete(self, request, pk):
        project, job = self.target()
        self._check_write()
        services.clear_job_rule(job, audit=self.audit)
        return Response(rule_body(project, job))


__all__ = ["ChannelViewSet", "NotificationViewSet", "EventSubscriptionViewSet", "ProjectRuleView", "JobRuleView"]
