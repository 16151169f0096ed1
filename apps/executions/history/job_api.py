"""/api/v1/jobs/: a job's definition (create, change, delete, pause, resume, next runs, the
crontab import, versions), its runs (executions/, trigger/, stats/) and its badge (badge/).

One viewset, defined here because executions is the highest app its actions need
(docs/architecture.md, "Layers"): the jobs app provides the definition's pieces (serializers,
filter, services, versions), the badges app the badge's and this app the runs'.
"""

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import filters, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from apps.api import idempotency
from apps.api.base import ApiViewMixin, EmptySerializer
from apps.api.filters import FilterBackend, names_a_filter
from apps.api.pagination import ExecutionCursorPagination
from apps.api.params import query_flag
from apps.api.representation import represent, represent_many
from apps.badges.api import BADGE_EXAMPLE, BadgeSerializer, badge_for
from apps.badges.models import Badge
from apps.jobs import versions
from apps.jobs.api import (JOB_EXAMPLE, JOB_HAS_LINKS, PLAN_LIMIT_NOTE, HasDependents, JobFilter, job_of,
                           listed_jobs, placed_runs_payload)
from apps.jobs.links import load_links
from apps.jobs.crontab_import import ImportCrontabSerializer, ImportResultSerializer, import_crontab
from apps.jobs.models import Job
from apps.jobs.queries import job_count
from apps.jobs.schedule_serializers import NO_SCHEDULE_DESCRIPTION, NextRunsQuerySerializer, RunsSerializer
from apps.jobs.scheduling import job_schedule
from apps.jobs.serializers import JobSerializer, refusals_as_errors
from apps.jobs.services import create_job, delete_job, pause_job, resume_job, rollback_job, update_job
from apps.jobs.versions_api import (NUMBER, JobVersionDetailSerializer, JobVersionSerializer, VersionConflictResponse,
                                    version_of, versions_of)
from apps.jobs.windowing import job_next_runs

from ..lateness import with_first_start
from ..models import Execution
from ..scheduling.triggers import trigger_now
from .api import ExecutionFilter, history_page, listed_executions
from .serializers import ExecutionSerializer
from .stats_api import DESCRIPTION as STATS_DESCRIPTION, EXAMPLE as STATS_EXAMPLE, WINDOW
from .stats_api import StatsSerializer, stats_response, window_of

@extend_schema_view(
    list=extend_schema(description=(
        "The jobs of the projects your key reaches, by name unless `?ordering=` says otherwise "
        "(`name`, `created_at`, `updated_at`, `next_run_at`; `-` for descending), with the filters below.")),
    retrieve=extend_schema(description=(
        "One job: its schedule, request (credentials masked), retry and notification settings, next "
        "run and health. Another organization's job, or one your key does not reach, is 404.")),
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
    destroy=extend_schema(
        parameters=[OpenApiParameter("force", bool, description="Delete even if other jobs depend on this one.")],
        description="Delete a job. A job other jobs depend on answers 409 `has_dependents` listing them "
                    "(`dependents`), unless `?force=true`: they then lose this dependency."),
)
class JobViewSet(ApiViewMixin, viewsets.ModelViewSet):
    """A job's definition, runs and badge; get_object (tenancy, roles) finds the job for each."""

    queryset = Job.objects.none()  # for the schema; get_queryset scopes the real one
    serializer_class = JobSerializer
    filter_backends = [FilterBackend, filters.OrderingFilter]
    filterset_class = JobFilter
    ordering_fields = ["name", "created_at", "updated_at", "next_run_at"]
    ordering = ["name", "id"]

    def get_queryset(self):
        return self.actor.scope_to_projects(Job.objects.for_organization(self.actor.organization).with_due())

    def get_object(self):
        # The list's filters (?enabled=..., the executions filters) never hide the job itself.
        job = job_of(self.actor, self.kwargs["pk"])
        if job is None:
            raise NotFound()
        self.check_object_permissions(self.request, job)
        job.organization = self.actor.organization  # as loaded by authentication, with its plan
        return job

    # -- the definition

    def retrieve(self, request, *args, **kwargs):
        return Response(represent(JobSerializer, self.get_object(), self.get_serializer_context()))

    def list(self, request, *args, **kwargs):
        jobs = listed_jobs(self.actor, request.query_params, filters.OrderingFilter.ordering_param)
        if jobs is None:  # a filter, a search or an ordering: the ORM's queryset
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
        job of the page has any). The organization goes straight into each job's related-
        object cache: every job of the page is the organization's (its ``organization_id``
        already equal), and Django's descriptor costs some fifteen calls a job to set it."""
        organization = self.actor.organization
        for job in jobs:
            job._state.fields_cache["organization"] = organization
        return load_links(jobs)

    def create(self, request, *args, **kwargs):
        return idempotency.run_once(request, "jobs.create", lambda: self._create(request))

    def _create(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        with refusals_as_errors():
            job = create_job(serializer.validated_data, actor=self.actor, audit=self.audit)
        return Response(represent(JobSerializer, job, self.get_serializer_context()), status=status.HTTP_201_CREATED)

    # Each change commits with its version and its audit event, or none does (apps.jobs.services).
    def perform_update(self, serializer):
        sent = serializer.initial_data if isinstance(serializer.initial_data, dict) else []
        with refusals_as_errors():
            update_job(serializer.instance, serializer.validated_data, actor=self.actor, sent=sent, audit=self.audit)

    def perform_destroy(self, job):
        force = query_flag(self.request, "force")
        dependents = list(job.downstream_links.select_related("downstream").order_by("id"))
        if dependents and not force:
            raise HasDependents(dependents)
        delete_job(job, audit=self.audit)  # its history goes after, in batches

    @extend_schema(request=EmptySerializer, responses=JobSerializer,
                   description="Pause the job. Its `dependents` (in the response) no longer run after it.")
    @action(detail=True, methods=["post"])
    def pause(self, request, pk=None):
        job = self.get_object()
        self._no_body()
        pause_job(job, reason="paused through the API", audit=self.audit)
        return Response(JobSerializer(job, context=self.get_serializer_context()).data)

    @extend_schema(request=EmptySerializer, responses=JobSerializer,
                   description="Resume from now: runs missed while paused are not caught up.")
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        job = self.get_object()
        self._no_body()
        with refusals_as_errors():
            resume_job(job, audit=self.audit)
        return Response(JobSerializer(job, context=self.get_serializer_context()).data)

    @extend_schema(parameters=[NextRunsQuerySerializer], responses=RunsSerializer, description=(
        "The job's next runs. A job with schedule `{\"type\": \"none\"}` runs only after its upstream jobs: "
        "`runs` is empty and `description` says so. With execution windows, each run says what becomes of its "
        "occurrence: `status` `run`, `skipped` (reason `outside_window`; `at` is the occurrence) or `deferred` "
        "(`at` is when it really runs, the windows' next opening; `occurrence` the schedule's time)."))
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

    @extend_schema(request=ImportCrontabSerializer, responses={200: ImportResultSerializer,
                                                               201: ImportResultSerializer},
                   description=(
                       "Turn a crontab (user or system format) into jobs: each line is checked and "
                       "reported. By default (`dry_run: true`) nothing is created (200); with "
                       "`dry_run: false` the valid lines become jobs (201)."))
    @action(detail=False, methods=["post"], url_path="import-crontab", filter_backends=[], pagination_class=None)
    def import_crontab(self, request):
        serializer = ImportCrontabSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        result = import_crontab(**serializer.validated_data, context=self.get_serializer_context(), audit=self.audit)
        created = any(job["id"] for job in result["jobs"])
        return Response(ImportResultSerializer(result).data, status=201 if created else 200)

    # -- the definition's versions (apps.jobs.versions)

    @extend_schema(responses=JobVersionSerializer(many=True), description=(
        "The job's versions, newest first: every change of its definition (API, pages, admin, import, "
        "rollback) with who made it, when and the fields it changed. Executions name theirs (`job_version`)."))
    @action(detail=True, methods=["get"], url_path="versions", filter_backends=[])
    def versions(self, request, pk=None):
        job = self.get_object()
        page = self.paginate_queryset(versions_of(job).order_by("-number"))
        return self.get_paginated_response(JobVersionSerializer(page, many=True).data)

    @extend_schema(responses=JobVersionDetailSerializer, description="One version, with the job's definition then.")
    @action(detail=True, methods=["get"], url_path=NUMBER, filter_backends=[], pagination_class=None)
    def version(self, request, pk=None, number=None):
        return Response(JobVersionDetailSerializer(version_of(self.get_object(), number)).data)

    @extend_schema(request=EmptySerializer, responses={201: JobVersionDetailSerializer, 200: JobVersionDetailSerializer},
                   description=(
        "Make this version's definition the job's again. The rollback is a new version (201, source "
        "`rollback`, `rollback_of` this number) and audit-logged; 200 with the current version when the job "
        "already has that definition. Validated as an edit: 400 with the usual codes, 402 `plan_limit` when "
        "the plan no longer allows it, 409 `version_conflict` when its project or an upstream job is gone."))
    @action(detail=True, methods=["post"], url_path=f"{NUMBER}/rollback", filter_backends=[], pagination_class=None)
    def rollback(self, request, pk=None, number=None):
        job = self.get_object()
        self._no_body()
        version = version_of(job, number)
        try:
            with refusals_as_errors():
                new = rollback_job(job, version, actor=self.actor, audit=self.audit)
        except versions.VersionConflict as exc:
            raise VersionConflictResponse(exc.message) from None
        current = new or version_of(job, job.version)
        return Response(JobVersionDetailSerializer(current).data,
                        status=status.HTTP_201_CREATED if new else status.HTTP_200_OK)

    # -- the runs (this app's)

    @extend_schema(request=EmptySerializer, responses={202: ExecutionSerializer},
                   description="Run the job now, outside its schedule.")
    @action(detail=True, methods=["post"])
    def trigger(self, request, pk=None):
        job = self.get_object()
        self._no_body()
        execution = trigger_now(job, audit=self.audit)
        return Response(ExecutionSerializer(execution).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=ExecutionSerializer(many=True), filters=True, description=(
        "This job's runs, newest first, a cursor page at a time, with the same filters and search as "
        "`/api/v1/executions/`."))
    @action(detail=True, methods=["get"], filter_backends=[FilterBackend],
            filterset_class=ExecutionFilter, pagination_class=ExecutionCursorPagination,
            queryset=Execution.objects.none())  # tells the schema what the filters apply to
    def executions(self, request, pk=None):
        job = self.get_object()
        executions = listed_executions(self.actor, request.query_params, job)
        if executions is None:  # a filter or a search, or SQLite: the ORM's queryset
            executions = self.filter_queryset(with_first_start(
                Execution.objects.for_organization(self.actor.organization).filter(job=job)))
        page = self.paginate_queryset(executions)
        return self.get_paginated_response(history_page(page, self.get_serializer_context()))

    @extend_schema(parameters=[WINDOW], responses=StatsSerializer, examples=[STATS_EXAMPLE],
                   description=STATS_DESCRIPTION)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def stats(self, request, pk=None):
        job = self.get_object()
        return stats_response(window_of(request), organization=self.actor.organization, job=job)

    # -- the badge (apps.badges)

    @extend_schema(request=None, responses={200: BadgeSerializer, 201: BadgeSerializer}, examples=[BADGE_EXAMPLE],
                   description="GET: the job's status badge (404 `not_found` when it has none). POST: create it "
                               "(201), or return the existing one (200). The SVG at `url` is public and shows "
                               "only `cron: up|failing|paused`.")
    @action(detail=True, methods=["get", "post"], filter_backends=[], pagination_class=None)
    def badge(self, request, pk=None):
        job = self.get_object()
        if request.method == "GET":
            badge = Badge.objects.filter(job=job).first()
            if badge is None:
                raise NotFound("This job has no badge yet; POST to create it.")
            return Response(BadgeSerializer(badge).data)
        self._no_body()
        badge, created = badge_for(job=job, audit=self.audit)
        return Response(BadgeSerializer(badge).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def _no_body(self):
        EmptySerializer(data=self.request.data or {}).is_valid(raise_exception=True)
