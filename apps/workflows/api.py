"""/api/v1/workflow-runs/{id}/: every execution of one workflow run, in order."""

import uuid

from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.exceptions import NotFound
from rest_framework.response import Response

from apps.api.base import ApiViewMixin
from apps.executions.models import Execution

from .runs import load_run
from .serializers import WorkflowRunSerializer


class WorkflowRunViewSet(ApiViewMixin, viewsets.GenericViewSet):
    serializer_class = WorkflowRunSerializer
    queryset = Execution.objects.none()  # for the schema
    filter_backends = []
    pagination_class = None
    lookup_value_regex = "[0-9a-fA-F-]{36}"

    @extend_schema(description="A workflow run (a chain of jobs started by one execution): every execution in "
                               "order with its status, and the dependencies between the run's jobs. The run's "
                               "id is its first execution's id (`workflow_run_id` on every execution). Another "
                               "organization's run answers 404.")
    def retrieve(self, request, pk=None):
        executions = self.actor.scope_to_projects(
            Execution.objects.for_organization(self.actor.organization), "job__project")
        try:
            run = load_run(uuid.UUID(pk), executions)
        except ValueError:
            run = None
        if run is None:
            raise NotFound("No workflow run with this id.")
        return Response(WorkflowRunSerializer(run).data)
