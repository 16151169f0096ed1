"""/api/v1/executions/ (history, replay) and /api/v1/dead-letter/ (dead runs, bulk replay)."""

import django_filters
from django import forms
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from apps.api.base import ApiViewMixin, EmptySerializer
from apps.api.errors import Conflict
from apps.api.filters import FilterBackend, UtcDateTimeFromToRangeFilter, names_a_filter
from apps.api.pagination import ExecutionCursorPagination
from apps.api.representation import represent_many
from apps.jobs.models import Job
from apps.sql import rows
from apps.sql.modes import on_postgresql

from cronsvc.search_query import MAX_LENGTH as MAX_SEARCH_LENGTH, InvalidSearch, parse as parse_search

from .. import lateness, queries

from . import search
from .. import cancelling
from ..cancelling import cancelled_by
from ..models import Execution
from .serializers import (
    BulkReplayResultSerializer, BulkReplaySerializer, ExecutionDetailSerializer, ExecutionSerializer,
)
from ..scheduling import triggers


class ExecutionNotFinished(Conflict):
    default_detail = "Only a finished execution can be replayed; wait until it is done."
    default_code = "execution_not_finished"


class ExecutionAlreadyFinished(Conflict):
    default_code = "execution_finished"

    def __init__(self, execution):
        super().__init__(f"The execution already finished ({execution.status}); only a queued or running "
                         "execution can be cancelled.")
        self.extra = {"status": execution.status}


class NotDead(NotFound):
    """Some ids are not dead executions of the caller's: nothing is replayed."""

    def __init__(self, missing):
        super().__init__(f"Not dead executions of yours: {', '.join(missing)}.")
        self.fields = {"ids": [str(self.detail)]}


class SearchField(forms.CharField):
    def clean(self, value):
        value = super().clean(value)
        if value:
            try:
                parse_search(value)
            except InvalidSearch as error:
                raise forms.ValidationError(str(error), code=error.code) from None
        return value


class StatusCodeField(forms.CharField):
    def clean(self, value):
        value = super().clean(value)
        if not value:
            return None
        try:
            return search.status_code_range(value)
        except search.InvalidStatusCode:
            raise forms.ValidationError("Give an HTTP status code (503) or a class (5xx).",
                                        code="invalid_status_code") from None


class SearchFilter(django_filters.CharFilter):
    field_class = SearchField

    def filter(self, qs, value):
        return search.matching(qs, value) if value else qs


class StatusCodeFilter(django_filters.CharFilter):
    field_class = StatusCodeField

    def filter(self, qs, value):
        return qs.filter(response_status__range=value) if value else qs


class ExecutionFilter(django_filters.FilterSet):
    # Plain UUID filters: another organization's job id yields an empty page, not an error.
    job = django_filters.UUIDFilter(field_name="job_id")
    project = django_filters.UUIDFilter(field_name="job__project_id")
    status = django_filters.ChoiceFilter(choices=Execution.Status.choices)
    trigger = django_filters.ChoiceFilter(choices=Execution.Trigger.choices)
    scheduled_for = UtcDateTimeFromToRangeFilter(
        help_text="scheduled_for_after / scheduled_for_before (ISO 8601).")
    q = SearchFilter(help_text=(
        f"Search the error message and response body (at most {MAX_SEARCH_LENGTH} characters): whole words, "
        "\"quoted phrases\", `or`, `-word` to exclude; case-insensitive. 400 `invalid_search` for a search "
        "with no word to find, `search_too_long`."))
    status_code = StatusCodeFilter(help_text=(
        "The response's HTTP status: exact (`503`) or a class (`5xx`). 400 `invalid_status_code`."))

    class Meta:
        model = Execution
        fields = ["job", "project", "status", "trigger", "scheduled_for", "q", "status_code"]

    def filter_queryset(self, queryset):
        """The filtered history; a search or a status code on an API list (cursor pages) reads
        only the newest time window that fills the page (search.newest_window: sorting all of
        a search's matches by time costs far more than a page). The web page's history
        (page numbers, no request here) gets the plain filter."""
        found = super().filter_queryset(queryset)
        data = self.form.cleaned_data
        if not (data.get("q") or data.get("status_code")) or not hasattr(self.request, "query_params"):
            return found
        pages = ExecutionCursorPagination()
        cursor = pages.decode_cursor(self.request)
        return search.newest_window(found, queryset, cursor=cursor, time_range=data.get("scheduled_for"),
                                    needed=(cursor.offset if cursor else 0) + pages.get_page_size(self.request) + 1)


def replay(execution, *, audit, now=None):
    try:
        return triggers.replay(execution, now=now, audit=audit)
    except triggers.NotFinished:
        raise ExecutionNotFinished() from None


class _ExecutionViews(ApiViewMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Execution.objects.none()  # for the schema; get_queryset scopes the real one
    filter_backends = [FilterBackend]  # the cursor fixes the order
    filterset_class = ExecutionFilter
    pagination_class = ExecutionCursorPagination

    def get_queryset(self):
        executions = lateness.with_first_start(Execution.objects.for_organization(self.actor.organization))
        return self.actor.scope_to_projects(executions, "job__project")

    def get_serializer_class(self):
        return ExecutionDetailSerializer if self.action == "retrieve" else ExecutionSerializer

    def list(self, request, *args, **kwargs):
        executions = self.listed(request)
        if executions is None:
            executions = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(executions)
        return self.get_paginated_response(history_page(page, self.get_serializer_context()))

    def listed(self, request):
        """The list's rows by a hand-written query (listed_executions), or None: the ORM's."""
        return None


#: The history of some projects is read job by job (queries.history_page_per_job_sql: up to
#: LIMIT + OFFSET runs per job) while the projects hold at most this many jobs and their
#: count, squared, is at most the organization's: along the organization's index a page
#: reads about LIMIT / share runs, share = the projects' jobs / the organization's, so the two
#: reads cost alike where jobs = organization's jobs / jobs (CPU per page measured alike at
#: 20-30 jobs of 1,000; for 1 of 1,000, 40-90 times less job by job; bench/README.md, "A
#: project's history, job by job").
PER_JOB_MAX_JOBS = 200


class ListedExecutions:
    """The unfiltered history of an organization (of one job, of some projects' jobs: the
    projects the actor reaches, one project's, the ``job`` and ``project`` filters), with
    ``first_started_at``: what ExecutionCursorPagination asks of a queryset (its ordering or
    the reverse, the cursor's position, a slice) answered by one hand-written query
    (queries.history_page_sql, or queries.history_page_per_job_sql for projects of few jobs),
    the same rows in the same order as the ORM's, whose compiling (the lateness subquery's
    above all) cost more than the query. ``project_ids``: None, every project's runs; else
    only those projects' (none: an empty history)."""

    ORDERING = ExecutionCursorPagination.ordering
    REVERSED = tuple(field[1:] for field in ORDERING)  # both descending: both ascending
    POSITIONS = {"scheduled_for__lt": False, "scheduled_for__gt": True}  # each lookup's ``reverse``

    def __init__(self, organization, *, job_id=None, project_ids=None, reverse=False, position=None):
        self.organization, self.job_id, self.project_ids = organization, job_id, project_ids
        self.reverse, self.position = reverse, position

    def _with(self, *, reverse, position):
        return ListedExecutions(self.organization, job_id=self.job_id, project_ids=self.project_ids,
                                reverse=reverse, position=position)

    def order_by(self, *fields):
        if fields not in (self.ORDERING, self.REVERSED):
            raise TypeError(f"ListedExecutions orders by {self.ORDERING} or its reverse, not {fields}")
        return self._with(reverse=fields == self.REVERSED, position=self.position)

    def filter(self, **lookups):
        ((lookup, position),) = lookups.items()
        if self.POSITIONS.get(lookup) is not self.reverse:
            raise TypeError(f"ListedExecutions filters by the cursor's position in its order, not by {lookup}")
        return self._with(reverse=self.reverse, position=position)

    def __getitem__(self, page):
        if not isinstance(page, slice) or page.step is not None:
            raise TypeError("ListedExecutions reads pages: slices without a step")
        if self.project_ids is not None and not self.project_ids:
            return []  # no project reached: what the ORM answers without a query
        start = page.start or 0
        limit = max(page.stop - start, 0)
        organization = rows.db_value(Execution, "organization", self.organization.pk)
        projects = [rows.db_value(Job, "project", pk) for pk in self.project_ids or ()]
        position = [] if self.position is None else [rows.db_value(Execution, "scheduled_for", self.position)]
        project_count = None if self.project_ids is None else len(projects)
        if self.job_id is None and projects and few_jobs(organization, projects):
            sql = queries.history_page_per_job_sql(project_count=project_count, position=bool(position),
                                                   reverse=self.reverse)
            params = [organization, *position, limit + start, *projects, organization, limit, start]
        else:
            sql = queries.history_page_sql(job=self.job_id is not None, reverse=self.reverse,
                                           position=bool(position), project_count=project_count)
            job = [] if self.job_id is None else [rows.db_value(Execution, "job", self.job_id)]
            params = [organization, organization, *job, *projects, *position, limit, start]
        found = rows.fetch_all(sql, params, Execution)
        for execution, first_started_at in found:
            execution.first_started_at = first_started_at
        return [execution for execution, _ in found]


def few_jobs(organization, projects):
    """Whether the projects (their ids as parameters) hold few enough of the organization's
    jobs to read their history job by job (PER_JOB_MAX_JOBS)."""
    ((organization_jobs, jobs),) = rows.fetch_all(queries.project_jobs_sql(len(projects)),
                                                 [organization, *projects, PER_JOB_MAX_JOBS + 1])
    return jobs <= PER_JOB_MAX_JOBS and jobs * jobs <= (organization_jobs or 0)


#: The filters that only narrow the history to some jobs, which ListedExecutions reads itself.
SCOPING_FILTERS = ("job", "project")


def scoping_filters(query_params):
    """{name: value} of the ``job`` and ``project`` filters the request gives a value (as the
    filter set's form cleans it), or None when it names any other filter or gives either a
    value the form refuses (the ORM's path answers that 400)."""
    named = [key for key in query_params if names_a_filter([key], ExecutionFilter)]
    if any(key not in SCOPING_FILTERS for key in named):
        return None
    values = {}
    for name in named:
        try:  # the filter's form field, as its form cleans it (the last value given)
            value = ExecutionFilter.base_filters[name].field.clean(query_params.get(name))
        except forms.ValidationError:
            return None
        if value is not None:
            values[name] = value
    return values


def listed_executions(actor, query_params, job=None, project=None):
    """The history's rows (ListedExecutions) of the actor's organization, of ``job`` (the job's
    own history: job_of scoped it) or of ``project`` (a project's history: the actor reaches
    it), when the request asks no filter but ``job`` and ``project`` and no search, on
    PostgreSQL; else None: the ORM's queryset with the filters, and the embedded mode's
    SQLite."""
    scoping = scoping_filters(query_params) if on_postgresql() else None
    if scoping is None:
        return None
    job_id = job.pk if job is not None else None
    if "job" in scoping:
        if job_id is not None and scoping["job"] != job_id:
            return ListedExecutions(actor.organization, project_ids=())  # two jobs: no run is both's
        job_id = scoping["job"]
    project_ids = None if job is not None else actor.project_ids
    for narrowed in (project.pk if project is not None else None, scoping.get("project")):
        if narrowed is not None:
            project_ids = (narrowed,) if project_ids is None or narrowed in project_ids else ()
    return ListedExecutions(actor.organization, job_id=job_id, project_ids=project_ids)


def history_page(executions, context):
    """A page of the history as ExecutionSerializer writes it, through the compiled
    representation (apps.api.representation): DRF's generic to_representation was most of a
    50-run page's cost."""
    return represent_many(ExecutionSerializer, executions, context)


@extend_schema_view(
    replay=extend_schema(request=EmptySerializer, responses={202: ExecutionSerializer},
                         description="Run the execution's request again (a new execution)."),
    cancel=extend_schema(request=EmptySerializer, responses={200: ExecutionSerializer}, description=(
        "Cancel a queued or running execution: a queued one never starts (nor does a waiting retry); a "
        "running one's request is closed at once. It ends `cancelled` with `cancelled_by` and `cancelled_at`, "
        "not failed and not retried. Idempotent: cancelling a cancelled execution answers it again. A finished "
        "execution answers 409 `execution_finished` (with its `status`). Needs the developer role.")),
)
class ExecutionViewSet(_ExecutionViews):
    def listed(self, request):
        return listed_executions(self.actor, request.query_params)

    def get_queryset(self):
        executions = super().get_queryset()
        if self.action == "retrieve":
            executions = executions.prefetch_related("attempts")
        return executions

    @action(detail=True, methods=["post"])
    def replay(self, request, pk=None):
        execution = self.get_object()
        EmptySerializer(data=request.data or {}).is_valid(raise_exception=True)
        new = replay(execution, audit=self.audit)
        return Response(ExecutionSerializer(new).data, status=status.HTTP_202_ACCEPTED)

    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        execution = self.get_object()
        EmptySerializer(data=request.data or {}).is_valid(raise_exception=True)
        actor = self.actor
        try:
            execution = cancelling.cancel(execution, by=cancelled_by(user=actor.user, api_key=actor.api_key),
                                          audit=self.audit)
        except cancelling.ExecutionFinished as exc:
            raise ExecutionAlreadyFinished(exc.execution) from None
        except cancelling.ExecutionGone:
            raise NotFound() from None  # as if it had been gone when the request came
        return Response(ExecutionSerializer(execution).data)


@extend_schema_view(list=extend_schema(description=(
    "The history of one project's jobs, newest first, with the same filters and search as "
    "`/api/v1/executions/`. Another organization's project, or one your key does not reach, is 404.")))
class ProjectExecutionViewSet(_ExecutionViews):
    """``/api/v1/projects/{id}/executions/`` (list only)."""

    def listed(self, request):
        return listed_executions(self.actor, request.query_params, project=self.project())

    def get_queryset(self):
        return super().get_queryset().filter(job__project=self.project())

    def project(self):
        """The project asked (404: another organization's, or one the actor does not reach),
        read once per request."""
        if not hasattr(self, "_project"):
            self._project = get_object_or_404(self.actor.projects(), pk=self.kwargs["pk"])
        return self._project


@extend_schema_view(replay=extend_schema(request=BulkReplaySerializer, responses={202: BulkReplayResultSerializer},
                                         description="Replay dead executions by id; any id that is not a "
                                                     "dead execution of yours answers 404 and replays nothing."))
class DeadLetterViewSet(_ExecutionViews):
    """Executions that exhausted their retries (status ``dead``)."""

    def get_queryset(self):
        return super().get_queryset().filter(status=Execution.Status.DEAD)

    @action(detail=False, methods=["post"], filter_backends=[], pagination_class=None)
    def replay(self, request):
        serializer = BulkReplaySerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        ids = list(dict.fromkeys(serializer.validated_data["ids"]))
        dead = {e.pk: e for e in self.get_queryset().filter(pk__in=ids).select_related("job__organization__plan")}
        missing = [str(pk) for pk in ids if pk not in dead]
        if missing:
            raise NotDead(missing)
        replays = triggers.replay_all([dead[pk] for pk in ids], audit=self.audit)
        return Response({"replays": ExecutionSerializer(replays, many=True).data}, status=status.HTTP_202_ACCEPTED)
