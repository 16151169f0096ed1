"""What /api/v1/jobs/{id}/ answers about a job's runs: executions/, trigger/ and stats/.

The actions are the executions app's (a job's history, a run started now, its statistics)
and the badge's is the badges app's (apps.badges.api.JobBadgeActions): each is mixed into
the jobs app's viewset here, in the layer above all three, and config/api_urls.py routes
/api/v1/jobs/ to ``JobViewSet`` below. So apps.jobs imports neither executions nor badges
(docs/architecture.md, "Layers"), and the URLs, operations and answers are the same.
"""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response

from apps.api.base import EmptySerializer
from apps.api.filters import FilterBackend
from apps.api.pagination import ExecutionCursorPagination
from apps.badges.api import JobBadgeActions
from apps.jobs import api as jobs_api

from .api import ExecutionFilter, history_page
from ..lateness import with_first_start
from ..models import Execution
from .serializers import ExecutionSerializer
from .stats_api import DESCRIPTION as STATS_DESCRIPTION, EXAMPLE as STATS_EXAMPLE, WINDOW
from .stats_api import StatsSerializer, stats_response, window_of
from ..scheduling.triggers import trigger_now


class JobRunActions:
    """Mixed into JobViewSet: its get_object (tenancy, roles) finds the job."""

    @extend_schema(request=EmptySerializer, responses={202: ExecutionSerializer},
                   description="Run the job now, outside its schedule.")
    @action(detail=True, methods=["post"])
    def trigger(self, request, pk=None):
        job = self.get_object()
        self._no_body()
        execution = trigger_now(
            job, audit=lambda execution: self.audit("job.trigger", job, {"execution": str(execution.pk)}))
        return Response(ExecutionSerializer(execution).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses=ExecutionSerializer(many=True), filters=True)
    @action(detail=True, methods=["get"], filter_backends=[FilterBackend],
            filterset_class=ExecutionFilter, pagination_class=ExecutionCursorPagination,
            queryset=Execution.objects.none())  # tells the schema what the filters apply to
    def executions(self, request, pk=None):
        job = self.get_object()
        executions = self.filter_queryset(with_first_start(Execution.objects.for_organization(self.actor.organization)
                                                           .filter(job=job)))
        page = self.paginate_queryset(executions)
        return self.get_paginated_response(history_page(page, self.get_serializer_context()))

    @extend_schema(parameters=[WINDOW], responses=StatsSerializer, examples=[STATS_EXAMPLE],
                   description=STATS_DESCRIPTION)
    @action(detail=True, methods=["get"], filter_backends=[], pagination_class=None)
    def stats(self, request, pk=None):
        job = self.get_object()
        return stats_response(window_of(request), organization=self.actor.organization, job=job)


class JobViewSet(JobRunActions, JobBadgeActions, jobs_api.JobViewSet):
    # /api/v1/jobs/: the jobs app's viewset with its runs' and its badge's actions. (A comment,
    # not a docstring: the schema describes the operations without a description of their own
    # by the first docstring along the classes, JobRunActions' as it was JobVersionActions'.)
    pass
