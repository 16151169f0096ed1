"""/api/v1/schedules/preview/, and the pieces of /api/v1/jobs/ that are the jobs app's: its
filter, the job lookup, the next runs' payload, the examples. The jobs viewset itself is
apps.executions.history.job_api's (the highest app its actions need)."""

import json
from zoneinfo import ZoneInfo

import django_filters
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Exists, OuterRef, Q, TextField
from django.db.models.functions import Cast
from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ErrorDetail, ValidationError
from rest_framework.response import Response

from apps.sql import rows
from apps.api.actor import Role
from apps.api.base import ApiViewMixin
from apps.api.filters import names_a_filter
from apps.api.errors import Conflict
from cronsvc.schedules import ScheduleError, describe, next_runs, validate_schedule
from cronsvc.schedules.parse import format_instant

from .health import STATUSES, health_filter
from . import queries
from .models import Job, JobDependency, JobDue
from .links import attach_links
from .schedule_serializers import RunsSerializer, SchedulePreviewSerializer

JOB_EXAMPLE = OpenApiExample(
    "Nightly cron job",
    request_only=True,
    value={
        "project": "0190f5c2-7d1e-7c1a-9b1e-2f3a4b5c6d7e",
        "name": "Nightly report",
        "schedule": {"type": "cron", "expression": "0 3 * * 1-5", "timezone": "Europe/Berlin"},
        "request": {"url": "https://example.com/hooks/report", "method": "POST",
                    "headers": {"X-Team": "data"}, "body": '{"job": "{{ job.id }}"}', "body_format": "json",
                    "auth": {"type": "bearer", "token": "s3cr3t"}},
        "retry": {"max_attempts": 3, "initial_delay_seconds": 10, "max_delay_seconds": 600},
    },
)
PLAN_LIMIT_NOTE = (
    " A schedule more frequent than the plan allows answers 402 `plan_limit` with `limit: "
    "min_interval_seconds`, `reason: interval_too_short` and the cheapest `plan` that allows it; below "
    "what any plan allows it answers 400 `interval_too_short`."
)


class HasDependents(Conflict):
    """Deleting a job other jobs depend on: say which, unless ``?force=true``."""

    default_code = "has_dependents"

    def __init__(self, links):
        names = ", ".join(link.downstream.name for link in links)
        super().__init__(f"Jobs depend on this one: {names}. Change their dependencies first, or delete with "
                         "?force=true (they lose this dependency).")
        self.extra = {"dependents": [{"job": str(link.downstream_id), "name": link.downstream.name,
                                      "on": link.on} for link in links]}


def runs_payload(schedule, runs):
    zone = ZoneInfo(schedule.timezone)
    return {
        "runs": [{"at": format_instant(run), "local": run.astimezone(zone).isoformat()} for run in runs],
        "description": describe(schedule),
    }


def placed_runs_payload(schedule, placed):
    """runs_payload for occurrences placed by execution windows: a deferred run at its
    real time with the occurrence it comes from, a skipped one marked with its reason."""
    payload = runs_payload(schedule, [p.at or p.occurrence for p in placed])
    for run, p in zip(payload["runs"], placed):
        run["status"] = "skipped" if p.at is None else "deferred" if p.at != p.occurrence else "run"
        run["reason"] = p.reason
        run["occurrence"] = format_instant(p.occurrence)
    return payload


class JobFilter(django_filters.FilterSet):
    project = django_filters.UUIDFilter(field_name="project_id")
    tag = django_filters.CharFilter(method="filter_tag", help_text="Jobs carrying this tag.")
    search = django_filters.CharFilter(method="filter_search", help_text="Part of a name or a tag.")
    health = django_filters.ChoiceFilter(choices=[(s, s) for s in STATUSES], method="filter_health",
                                         help_text="Jobs in this health (as the dashboard shows it).")

    class Meta:
        model = Job
        fields = ["project", "enabled", "schedule_type", "last_status", "region"]

    def filter_tag(self, queryset, name, value):
        # Matched in the JSON text so it also works on SQLite (embedded mode) without JSON operators.
        quoted = json.dumps(value, ensure_ascii=False)  # the tag as it appears in the JSON text
        return queryset.alias(tags_text=Cast("tags", TextField())).filter(tags_text__contains=quoted)

    def filter_health(self, queryset, name, value):
        return queryset.filter(health_filter(value))

    def filter_search(self, queryset, name, value):
        return queryset.alias(tags_text=Cast("tags", TextField())).filter(
            Q(name__icontains=value) | Q(tags_text__icontains=value))


# Whether a job has any dependency link, up or down (so a page without any reads none).
JOB_HAS_LINKS = Exists(JobDependency.objects.filter(Q(upstream=OuterRef("pk")) | Q(downstream=OuterRef("pk"))))


def job_of(actor, pk):
    """The job ``pk`` of the actor's organization and projects with its dependency links
    attached, or None (a malformed id included). One hand-written query: every job
    endpoint reads it, and compiling the ORM's query and prefetches costs more than running
    them."""
    try:
        pk = Job._meta.pk.to_python(pk)
    except DjangoValidationError:
        return None
    found = rows.fetch_all(queries.job_with_links_sql(), [rows.db_value(Job, "id", pk),
                                 rows.db_value(Job, "organization", actor.organization.pk)], Job, JobDependency, JobDue)
    if not found or (actor.project_ids is not None and found[0][0].project_id not in actor.project_ids):
        return None
    job = found[0][0]
    job.loaded_due(found[0][2].next_run_at)
    return attach_links([job], [(dependency, name) for _, dependency, _, name in found])[0]


class ListedJobs:
    """The unfiltered jobs list of an actor (its organization's jobs in the projects it
    reaches, by name then id, annotated ``has_links``) as a sequence Django's Paginator pages
    through: each page one hand-written query, the same rows in the same order as the ORM's
    queryset, whose compiling cost more than the query (bench/README.md, API costs)."""

    ordered = True

    def __init__(self, actor):
        self.project_count = None if actor.project_ids is None else len(actor.project_ids)
        self.params = [rows.db_value(Job, "organization", actor.organization.pk)]
        if actor.project_ids is not None:
            self.params += [rows.db_value(Job, "project", pk) for pk in actor.project_ids]

    def count(self):
        return rows.fetch_one(queries.job_total_sql(project_count=self.project_count), self.params)[0]

    def __len__(self):
        return self.count()

    def __getitem__(self, page):
        if not isinstance(page, slice) or page.step is not None:
            raise TypeError("ListedJobs reads pages: slices without a step")
        start, stop = page.start or 0, page.stop
        found = rows.fetch_all(queries.job_page_sql(project_count=self.project_count),
                               [*self.params, max(stop - start, 0), start], Job, JobDue)
        for job, due, has_links in found:
            job.has_links = bool(has_links)  # SQLite answers EXISTS with 0 or 1
            job.loaded_due(due.next_run_at)
        return [job for job, _, _ in found]


def listed_jobs(actor, query_params, ordering_param):
    """The jobs list's rows when the request asks no filter, search or ordering (ListedJobs),
    else None: the ORM's queryset applies them. A key limited to no project at all is left
    to the ORM too (an empty IN list is no SQL)."""
    if (ordering_param in query_params or names_a_filter(query_params, JobFilter)
            or actor.project_ids is not None and not actor.project_ids):
        return None
    return ListedJobs(actor)


class SchedulePreviewViewSet(ApiViewMixin, viewsets.GenericViewSet):
    """Runs of a schedule that is not saved yet."""

    serializer_class = SchedulePreviewSerializer
    required_roles = {"preview": Role.VIEWER}
    filter_backends = []
    pagination_class = None

    @extend_schema(responses=RunsSerializer)
    @action(detail=False, methods=["post"])
    def preview(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        schedule, after = data["schedule"], data.get("after") or timezone.now()
        window = {"start_at": data.get("start_at"), "end_at": data.get("end_at")}
        try:
            validate_preview(schedule, after, **window)
        except ScheduleError as exc:
            raise schedule_error_at_root(exc) from None
        return Response(runs_payload(schedule, next_runs(schedule, after, data["count"], **window)))


def validate_preview(schedule, after, **window):
    """Refuse schedules that cannot fire (in the window, after ``after``); no plan check."""
    validate_schedule(schedule, now=after, min_interval_seconds=0, **window)


def schedule_error_at_root(exc):
    return ValidationError({exc.field: [ErrorDetail(exc.message, code=exc.code)]})
