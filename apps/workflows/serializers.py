from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.executions.history.serializers import ExecutionSerializer


class WorkflowExecutionSerializer(ExecutionSerializer):
    job_name = serializers.CharField(source="job.name", read_only=True)

    class Meta(ExecutionSerializer.Meta):
        fields = [*ExecutionSerializer.Meta.fields, "job_name"]
        read_only_fields = fields


class WorkflowEdgeSerializer(serializers.Serializer):
    upstream = serializers.UUIDField()
    downstream = serializers.UUIDField()
    on = serializers.CharField()


class WorkflowRunSerializer(serializers.Serializer):
    id = serializers.UUIDField(help_text="The id of the run's first execution.")
    status = serializers.CharField(help_text="running, succeeded, failed or skipped.")
    executions = WorkflowExecutionSerializer(many=True, help_text="Every execution of the run, in order.")
    edges = serializers.SerializerMethodField(help_text="The dependencies between the run's jobs.")

    @extend_schema_field(WorkflowEdgeSerializer(many=True))
    def get_edges(self, run):
        return [{"upstream": str(u), "downstream": str(d), "on": on} for u, d, on in run.edges]
