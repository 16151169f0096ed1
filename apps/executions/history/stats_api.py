"""GET /api/v1/stats/ (organization-wide) and what GET /api/v1/jobs/{id}/stats/ answers."""

from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail, NotFound, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api.base import ApiViewMixin
from apps.projects.models import Project

from . import stats

DESCRIPTION = (
    "Runs finished in the window (by scheduled time; `24h`, `7d` or `30d` ending now), success rate "
    "(succeeded / (succeeded + failed); skipped runs are left out), failures by error kind, and nearest-rank "
    "p50/p95/p99 of the duration and of the lateness (start minus scheduled time), in milliseconds. "
    "`24h` is computed exactly from the runs themselves. `7d` and `30d` read whole past days from the daily "
    "roll-ups and the rest from the runs: counts are exact, but percentiles of several days are merged as "
    "the run-weighted mean of each day's percentile, an approximation (`percentiles: approximate`). "
    "An unknown window answers 400 `invalid_window`."
)
WINDOW = OpenApiParameter("window", str, enum=list(stats.WINDOWS), default="24h", description="The period ending now.")
EXAMPLE = OpenApiExample("A week of a job", response_only=True, value={
    "window": "7d", "start": "2026-11-22T21:00:00Z", "end": "2026-11-29T21:00:00Z",
    "runs": 2016, "succeeded": 1990, "failed": 20, "skipped": 6, "success_rate": 99.01,
    "failures_by_kind": {"timeout": 12, "http_status": 8},
    "duration_ms": {"p50": 180, "p95": 420, "p99": 1900},
    "lateness_ms": {"p50": 35, "p95": 120, "p99": 410}, "percentiles": "approximate"})


class PercentilesSerializer(serializers.Serializer):
    p50 = serializers.IntegerField(allow_null=True)
    p95 = serializers.IntegerField(allow_null=True)
    p99 = serializers.IntegerField(allow_null=True)


class StatsSerializer(serializers.Serializer):
    window = serializers.ChoiceField(choices=list(stats.WINDOWS))
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    runs = serializers.IntegerField()
    succeeded = serializers.IntegerField()
    failed = serializers.IntegerField(help_text="failed, timed out and dead runs")
    skipped = serializers.IntegerField()
    success_rate = serializers.FloatField(allow_null=True, help_text="Percent; null without any run.")
    failures_by_kind = serializers.DictField(child=serializers.IntegerField())
    duration_ms = PercentilesSerializer()
    lateness_ms = PercentilesSerializer()
    percentiles = serializers.ChoiceField(choices=["exact", "approximate"])


def window_of(request):
    window = request.query_params.get("window", "24h")
    if window not in stats.WINDOWS:
        raise ValidationError({"window": [ErrorDetail(
            f"Unknown window {window[:20]!r}; use one of {', '.join(stats.WINDOWS)}.", code="invalid_window")]})
    return window


def stats_response(window, **scope):
    return Response(StatsSerializer(stats.window_stats(window, timezone.now(), **scope)).data)


class StatsView(ApiViewMixin, APIView):
    """Organization-wide run statistics (one object, not a list: hence a plain view)."""

    @extend_schema(parameters=[WINDOW, OpenApiParameter("project", str, description="Only this project's jobs (id).")],
                   responses=StatsSerializer, examples=[EXAMPLE], description=DESCRIPTION)
    def get(self, request):
        window = window_of(request)
        project_ids = self.actor.project_ids
        project = request.query_params.get("project")
        if project:
            found = Project.objects.filter(organization=self.actor.organization, pk=_uuid(project))
            if project_ids is not None:
                found = found.filter(pk__in=project_ids)
            if not found.exists():
                raise NotFound("No such project.")
            project_ids = [found.get().pk]
        return stats_response(window, organization=self.actor.organization, project_ids=project_ids)


def _uuid(text):
    try:
        return serializers.UUIDField().to_internal_value(text)
    except ValidationError:
        raise ValidationError({"project": [ErrorDetail("Not a valid project id.", code="invalid")]}) from None
