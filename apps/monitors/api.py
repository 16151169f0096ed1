"""/api/v1/monitors/: heartbeat monitors, their pings and their badge."""

import django_filters
from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import filters, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from apps.api.base import ApiViewMixin, EmptySerializer
from apps.api.filters import FilterBackend
from apps.api.pagination import NewestFirstCursorPagination
from apps.plans.limits import PlanLimit
from apps.jobs.serializers import plan_limit_error

from . import services
from .badge_views import BADGE_STATES
from .models import Monitor, Ping
from .serializers import MonitorSerializer, PingSerializer

MONITOR_EXAMPLE = OpenApiExample("Nightly backup", request_only=True, value={
    "name": "Nightly backup", "schedule": {"type": "cron", "expression": "0 2 * * *", "timezone": "Europe/Berlin"},
    "grace_seconds": 1800})


class PingPagination(NewestFirstCursorPagination):
    ordering = ("-created_at", "-id")


class MonitorBadgeSerializer(serializers.Serializer):
    url = serializers.CharField()
    state = serializers.CharField()


class MonitorFilter(django_filters.FilterSet):
    project = django_filters.UUIDFilter(field_name="project_id")

    class Meta:
        model = Monitor
        fields = ["project", "state", "schedule_type"]


@extend_schema_view(
    create=extend_schema(examples=[MONITOR_EXAMPLE], description=(
        "Create a monitor. Refused with 402 `plan_limit` (`limit: max_monitors`) past the plan's monitors.")),
    pause=extend_schema(request=EmptySerializer, responses=MonitorSerializer,
                        description="Pause: never late or down while paused; the next ping resumes it."),
    resume=extend_schema(request=EmptySerializer, responses=MonitorSerializer,
                         description="Resume: back to `new`, waiting for its next ping."),
    pings=extend_schema(responses=PingSerializer(many=True), description="The monitor's pings, newest first.",
                        # the action's queryset is pings (integer ids); the path's id is the monitor's
                        parameters=[OpenApiParameter("id", OpenApiTypes.UUID, OpenApiParameter.PATH)]),
    badge=extend_schema(request=None, responses={200: MonitorBadgeSerializer, 201: MonitorBadgeSerializer},
                        description="POST creates the monitor's public status badge (201) or returns it (200)."),
)
class MonitorViewSet(ApiViewMixin, viewsets.ModelViewSet):
    queryset = Monitor.objects.none()
    serializer_class = MonitorSerializer
    filter_backends = [FilterBackend, filters.OrderingFilter]
    filterset_class = MonitorFilter
    ordering_fields = ["name", "created_at", "last_ping_at", "next_expected_at"]
    ordering = ["name", "id"]

    def get_queryset(self):
        monitors = Monitor.objects.for_organization(self.actor.organization).select_related("project")
        return self.actor.scope_to_projects(monitors)

    def get_object(self):
        try:
            monitor = self.get_queryset().filter(pk=self.kwargs["pk"]).first()
        except DjangoValidationError:
            monitor = None
        if monitor is None:
            raise NotFound()
        self.check_object_permissions(self.request, monitor)
        return monitor

    def perform_create(self, serializer):
        try:
            serializer.instance = services.create_monitor(**serializer.validated_data, audit=self.audit)
        except PlanLimit as exc:
            raise plan_limit_error(exc) from None

    def perform_update(self, serializer):
        fields = dict(serializer.validated_data)
        project = fields.pop("project", None)
        if project is not None and project.pk != serializer.instance.project_id:
            fields["project"] = project
        serializer.instance = services.update_monitor(serializer.instance, sent=serializer.validated_data,
                                                      audit=self.audit, **fields)

    def perform_destroy(self, monitor):
        services.delete_monitor(monitor, audit=self.audit)

    @action(detail=True, methods=["post"])
    def pause(self, request, pk=None):
        monitor = self.get_object()
        self._no_body()
        services.pause_monitor(monitor, audit=self.audit)
        return Response(MonitorSerializer(monitor, context=self.get_serializer_context()).data)

    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        monitor = self.get_object()
        self._no_body()
        services.resume_monitor(monitor, audit=self.audit)
        return Response(MonitorSerializer(monitor, context=self.get_serializer_context()).data)

    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=PingPagination,
            queryset=Ping.objects.none())
    def pings(self, request, pk=None):
        monitor = self.get_object()
        page = self.paginate_queryset(Ping.objects.filter(monitor=monitor))
        return self.get_paginated_response(PingSerializer(page, many=True).data)

    @action(detail=True, methods=["post"], filter_backends=[], pagination_class=None)
    def badge(self, request, pk=None):
        from django.conf import settings
        from django.urls import reverse

        monitor = self.get_object()
        self._no_body()
        token, created = services.ensure_badge(monitor, audit=self.audit)
        data = {"url": settings.SITE_URL + reverse("monitor-badge-svg", args=[token]),
                "state": BADGE_STATES[monitor.state]}
        return Response(data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def _no_body(self):
        EmptySerializer(data=self.request.data or {}).is_valid(raise_exception=True)
