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


class ListedExecutions:
    """The unfiltered history of an actor's organization (or of one job), in the projects it
    reaches, with ``first_started_at``: what ExecutionCursorPagination asks of a queryset
    (its ordering or the reverse, the cursor's position, a slice) answered by one
    hand-written query (queries.history_page_sql), the same rows in the same order as the
    ORM's, whose compiling (the lateness subquery's above all) cost more than the query."""

    ORDERING = ExecutionCursorPagination.ordering
    REVERSED = tuple(field[1:] for field in ORDERING)  # both descending: both ascending
    POSITIONS = {"scheduled_for__lt": False, "scheduled_for__gt": True}  # each lookup's ``reverse``

    def __init__(self, actor, job=None, *, reverse=False, position=None):
        self.actor, self.job, self.reverse, self.position = actor, job, reverse, position

    def order_by(self, *fields):
        if fields not in (self.ORDERING, self.REVERSED):
            raise TypeError(f"ListedExecutions orders by {self.ORDERING} or its reverse, not {fields}")
        return ListedExecutions(self.actor, self.job, reverse=fields == self.REVERSED, position=self.position)

    def filter(self, **lookups):
        ((lookup, position),) = lookups.items()
        if self.POSITIONS.get(lookup) is not self.reverse:
            raise TypeError(f"ListedExecutions filters by the cursor's position in its order, not by {lookup}")
        return ListedExecutions(self.actor, self.job, reverse=self.reverse, position=position)

    def __getitem__(self, page):
        if not isinstance(page, slice) or page.step is not None:
            raise TypeError("ListedExecutions reads pages: slices without a step")
        project_ids = None if self.job else self.actor.project_ids  # a job's history: job_of scoped it
        organization = rows.db_value(Execution, "organization", self.actor.organization.pk)
        params = [organization, organization]
        if self.job:
            params.append(rows.db_value(Execution, "job", self.job.pk))
        params += [rows.db_value(Job, "project", pk) for pk in project_ids or ()]
        if self.position is not None:
            params.append(rows.db_value(Execution, "scheduled_for", self.position))
        start = page.start or 0
        sql = queries.history_page_sql(job=bool(self.job), reverse=self.reverse, position=self.position is not None,
                                       project_count=None if project_ids is None else len(project_ids))
        found = rows.fetch_all(sql, [*params, max(page.stop - start, 0), start], Execution)
        for execution, first_started_at in found:
            execution.first_started_at = first_started_at
        return [execution for execution, _ in found]


def listed_executions(actor, query_params, job=None):
    """The history's rows when the request asks no filter or search (ListedExecutions), on
    PostgreSQL, else None: the ORM's queryset with the filters and the embedded mode's
    SQLite. A key limited to no project at all is left to the ORM too (no empty IN list)."""
    if (not on_postgresql() or names_a_filter(query_params, ExecutionFilter)
            or not job and actor.project_ids is not None and not actor.project_ids):
        return None
    return ListedExecutions(actor, job)


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

    def get_queryset(self):
        project = get_object_or_404(self.actor.projects(), pk=self.kwargs["pk"])
        return super().get_queryset().filter(job__project=project)


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
