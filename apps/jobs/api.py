"""/api/v1/jobs/ and /api/v1/schedules/preview/.

A job's runs, trigger, statistics and badge (/api/v1/jobs/{id}/executions/, trigger/, stats/,
badge/) are actions of the executions and badges apps, mixed into JobViewSet above this
layer by apps.executions.history.job_api, which config/api_urls.py routes /api/v1/jobs/ to."""

import json
from zoneinfo import ZoneInfo

import django_filters
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Exists, OuterRef, Q, TextField
from django.db.models.functions import Cast
from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import filters, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ErrorDetail, NotFound, ValidationError
from rest_framework.response import Response

from apps.sql import rows
from apps.api import idempotency
from apps.api.actor import Role
from apps.api.base import ApiViewMixin, EmptySerializer
from apps.api.errors import Conflict
from apps.api.filters import FilterBackend, names_a_filter
from apps.api.params import query_flag
from apps.api.representation import represent, represent_many
from cronsvc.schedules import ScheduleError, describe, next_runs, validate_schedule
from cronsvc.schedules.parse import format_instant

from .health import STATUSES, health_filter
from . import queries
from .queries import job_count
from .models import Job, JobDependency
from .scheduling import job_schedule
from .crontab_import import ImportCrontabSerializer, ImportResultSerializer, import_crontab
from .links import attach_links, load_links
from .schedule_serializers import (
    NO_SCHEDULE_DESCRIPTION, NextRunsQuerySerializer, RunsSerializer, SchedulePreviewSerializer,
)
from .serializers import JobSerializer, plan_limit_error
from .services import create_job, delete_job, pause_job, resume_job, update_job
from .versions_api import JobVersionActions
from .windowing import job_next_runs
from .validation import PlanLimit

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


def _job_of(actor, pk):
    """The job ``pk`` of the actor's organization and projects with its dependency links
    attached, or None (a malformed id included). One hand-written query: every job
    endpoint reads it, and compiling the ORM's query and prefetches costs more than running
    them."""
    try:
        pk = Job._meta.pk.to_python(pk)
    except DjangoValidationError:
        return None
    found = rows.fetch_all(queries.job_with_links_sql(), [rows.db_value(Job, "id", pk),
                                 rows.db_value(Job, "organization", actor.organization.pk)], Job, JobDependency)
    if not found or (actor.project_ids is not None and found[0][0].project_id not in actor.project_ids):
        return None
    job = found[0][0]
    return attach_links([job], [(dependency, name) for _, dependency, name in found])[0]


@extend_schema_view(
    create=extend_schema(
        examples=[JOB_EXAMPLE],
        parameters=[OpenApiParameter(idempotency.HEADER, str, OpenApiParameter.HEADER, description=(
            "Optional. A retry with the same key (and body) within 24 h returns the first result "
            "instead of creating a second job; a different body answers 409 idempotency_key_reused.")),
            OpenApiParameter("Idempotent-Replayed", str, OpenApiParameter.HEADER, response=[201],
                             description="`true` when this is the stored result of an earlier request.")],
        description="Create a job. Refused with 402 `plan_limit` past max_jobs, max_timeout_seconds or "
                    "max_attempts." + PLAN_LIMIT_NOTE,
    ),
    update=extend_schema(examples=[JOB_EXAMPLE], description=(
        "Replace a job. Optional fields left out keep their values; request.auth left out (or sent back "
        "masked as returned) keeps the stored credentials." + PLAN_LIMIT_NOTE)),
    partial_update=extend_schema(description="Change some fields; request.auth omitted keeps the stored "
                                             "credentials." + PLAN_LIMIT_NOTE),
    pause=extend_schema(request=EmptySerializer, responses=JobSerializer,
                        description="Pause the job. Its `dependents` (in the response) no longer run after it."),
    destroy=extend_schema(
        parameters=[OpenApiParameter("force", bool, description="Delete even if other jobs depend on this one.")],
        description="Delete a job. A job other jobs depend on answers 409 `has_dependents` listing them "
                    "(`dependents`), unless `?force=true`: they then lose this dependency."),
    resume=extend_schema(request=EmptySerializer, responses=JobSerializer,
                         description="Resume from now: runs missed while paused are not caught up."),
    next_runs=extend_schema(parameters=[NextRunsQuerySerializer], responses=RunsSerializer, description=(
        "The job's next runs. A job with schedule `{\"type\": \"none\"}` runs only after its upstream jobs: "
        "`runs` is empty and `description` says so. With execution windows, each run says what becomes of its "
        "occurrence: `status` `run`, `skipped` (reason `outside_window`; `at` is the occurrence) or `deferred` "
        "(`at` is when it really runs, the windows' next opening; `occurrence` the schedule's time).")),
    import_crontab=extend_schema(request=ImportCrontabSerializer, responses={200: ImportResultSerializer,
                                                                             201: ImportResultSerializer}),
)
class JobViewSet(JobVersionActions, ApiViewMixin, viewsets.ModelViewSet):
    queryset = Job.objects.none()  # for the schema; get_queryset scopes the real one
    serializer_class = JobSerializer
    filter_backends = [FilterBackend, filters.OrderingFilter]
    filterset_class = JobFilter
    ordering_fields = ["name", "created_at", "updated_at", "next_run_at"]
    ordering = ["name", "id"]

    def get_queryset(self):
        return self.actor.scope_to_projects(Job.objects.for_organization(self.actor.organization))

    def get_object(self):
        # The list's filters (?enabled=..., the executions filters) never hide the job itself.
        job = _job_of(self.actor, self.kwargs["pk"])
        if job is None:
            raise NotFound()
        self.check_object_permissions(self.request, job)
        job.organization = self.actor.organization  # as loaded by authentication, with its plan
        return job

    def retrieve(self, request, *args, **kwargs):
        return Response(represent(JobSerializer, self.get_object(), self.get_serializer_context()))

    def list(self, request, *args, **kwargs):
        jobs = self.filter_queryset(self.get_queryset()).annotate(has_links=JOB_HAS_LINKS)
        page = self._complete(self.paginate_queryset(jobs))
        return self.get_paginated_response(represent_many(JobSerializer, page, self.get_serializer_context()))

    def known_count(self):
        """The list's total when it shows every job of the organization: the count the
        database keeps (jobcount), not a COUNT over the organization's jobs, which grows with
        them (bench/README.md, "Figures behind the code")."""
        if (self.action != "list" or self.actor.project_ids is not None
                or names_a_filter(self.request.query_params, self.filterset_class)):
            return None
        return job_count(self.actor.organization.pk)

    def _complete(self, jobs):
        """The caller's organization (and plan) as loaded by authentication, rather than
        joined again per job, and the page's dependency links in one query (none when no
        job of the page has any)."""
        for job in jobs:
            job.organization = self.actor.organization
        return load_links(jobs)

    def create(self, request, *args, **kwargs):
        return idempotency.run_once(request, "jobs.create", lambda: self._create(request))

    def _create(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        self.perform_create(serializer)
        context = self.get_serializer_context()
        return Response(represent(JobSerializer, serializer.instance, context), status=status.HTTP_201_CREATED)

    # Each change commits with its audit event, or neither does (apps.jobs.services).
    def perform_create(self, serializer):
        create_job(serializer, audit=self.audit)

    def perform_update(self, serializer):
        fields = serializer.initial_data if isinstance(serializer.initial_data, dict) else []
        update_job(serializer, audit=self.audit, fields=fields)

    def perform_destroy(self, job):
        force = query_flag(self.request, "force")
        dependents = list(job.downstream_links.select_related("downstream").order_by("id"))
        if dependents and not force:
            raise HasDependents(dependents)
        delete_job(job, audit=self.audit)  # its history goes after, in batches

    @action(detail=True, methods=["post"])
    def pause(self, request, pk=None):
        job = self.get_object()
        self._no_body()
        pause_job(job, reason="paused through the API", audit=self.audit)
        return Response(JobSerializer(job, context=self.get_serializer_context()).data)

    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        job = self.get_object()
        self._no_body()
        try:
            resume_job(job, audit=self.audit)
        except PlanLimit as exc:
            raise plan_limit_error(exc) from None
        return Response(JobSerializer(job, context=self.get_serializer_context()).data)

    @action(detail=True, methods=["get"], url_path="next-runs", filter_backends=[], pagination_class=None)
    def next_runs(self, request, pk=None):
        job = self.get_object()
        query = NextRunsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        if job.schedule_type == Job.ScheduleType.NONE:  # its upstream jobs start it: no run of its own
            return Response({"runs": [], "description": NO_SCHEDULE_DESCRIPTION})
        after = query.validated_data.get("after") or timezone.now()
        placed = job_next_runs(job, after, query.validated_data["count"])
        return Response(placed_runs_payload(job_schedule(job), placed))

    @action(detail=False, methods=["post"], url_path="import-crontab", filter_backends=[], pagination_class=None)
    def import_crontab(self, request):
        serializer = ImportCrontabSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        result = import_crontab(**serializer.validated_data, context=self.get_serializer_context())
        created = [str(job["id"]) for job in result["jobs"] if job["id"]]
        if created:
            self.audit("job.import_crontab", serializer.validated_data["project"], {"created": created})
        return Response(ImportResultSerializer(result).data, status=201 if created else 200)

    def _no_body(self):
        EmptySerializer(data=self.request.data or {}).is_valid(raise_exception=True)


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
