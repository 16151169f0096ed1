"""The API shape of executions and their attempts.

Captured requests are shown without secrets: credential-bearing headers read ``••••``.
"""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.api.base import StrictSerializer
from cronsvc.delivery.masking import masked

from .. import lateness
from ..models import Attempt, Execution

MAX_BULK_REPLAY = 100


class ExecutionResponseSerializer(serializers.Serializer):
    status = serializers.IntegerField(allow_null=True, help_text="null when no response arrived.")
    headers = serializers.DictField(child=serializers.CharField(allow_blank=True))
    body = serializers.CharField(allow_blank=True, help_text="The first RESPONSE_BODY_MAX_BYTES of the body.")


class ExecutionErrorSerializer(serializers.Serializer):
    kind = serializers.CharField(help_text="timeout, connect_error, dns_error, invalid_response, http_5xx, body_mismatch, ...")
    message = serializers.CharField(allow_blank=True)


class SentRequestSerializer(serializers.Serializer):
    method = serializers.CharField()
    url = serializers.CharField()
    headers = serializers.DictField(child=serializers.CharField(allow_blank=True))
    body = serializers.CharField(allow_blank=True)


def _response(row):
    return {"status": row.response_status, "headers": masked(row.response_headers),
            "body": row.response_body}


def _error(row):
    return {"kind": row.error_kind, "message": row.error_message} if row.error_kind else None


class AttemptSerializer(serializers.ModelSerializer):
    request = serializers.SerializerMethodField()
    response = serializers.SerializerMethodField()
    error = serializers.SerializerMethodField()
    superseded = serializers.BooleanField(read_only=True)

    class Meta:
        model = Attempt
        fields = ["number", "started_at", "finished_at", "duration_ms", "outcome", "remote_addr",
                  "request", "response", "error", "superseded"]
        # superseded: sent by a worker that had lost the run's lease (docs/architecture.md,
        # "Fenced leases"): history, not the run's outcome for its number

    @extend_schema_field(SentRequestSerializer)
    def get_request(self, attempt):
        return {"method": attempt.request_method, "url": attempt.request_url,
                "headers": masked(attempt.request_headers), "body": attempt.request_body}

    @extend_schema_field(ExecutionResponseSerializer)
    def get_response(self, attempt):
        return _response(attempt)

    @extend_schema_field(ExecutionErrorSerializer(allow_null=True))
    def get_error(self, attempt):
        return _error(attempt)


class CancelledBySerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["user", "api_key", "operator", "system"])
    id = serializers.CharField(allow_null=True)
    name = serializers.CharField(help_text="The user's email or the API key's name.")


class ExecutionSerializer(serializers.ModelSerializer):
    response = serializers.SerializerMethodField()
    error = serializers.SerializerMethodField()
    workflow_run_id = serializers.UUIDField(
        read_only=True, allow_null=True,
        help_text="The workflow run (chain of jobs) this execution is part of: its first execution's id.")
    upstream_executions = serializers.ListField(
        child=serializers.UUIDField(), read_only=True,
        help_text="For a run started by its upstream jobs (trigger `dependency`): the upstream executions.")
    job_version = serializers.IntegerField(
        read_only=True, allow_null=True,
        help_text="The job version this run was made with (GET /jobs/{id}/versions/{n}/); null before versions.")
    cancelled_by = CancelledBySerializer(read_only=True, allow_null=True,
                                         help_text="Who cancelled the run (status `cancelled`), else null.")

    defer_reason = serializers.CharField(read_only=True, help_text=(
        "Why the run did not go out at its time: `outside_window` (moved to the job's next window opening, "
        "which is `scheduled_for`), `overload` (held while its plan's queue was overloaded; low priority), "
        "else empty. docs/run-control.md"))
    deferred_from = serializers.DateTimeField(read_only=True, allow_null=True, help_text=(
        "For a run deferred to a window's opening: the occurrence it was moved from."))

    jitter_seconds = serializers.IntegerField(read_only=True, help_text=(
        "The job's jitter applied to this run on purpose: it was due this long after `scheduled_for`."))
    lateness_seconds = serializers.SerializerMethodField(help_text=(
        "How long after it was due (`scheduled_for` plus `jitter_seconds`) the run's first attempt started; "
        "null while it has not started. Jitter is not lateness; a retry's wait is not either."))

    class Meta:
        model = Execution
        fields = ["id", "job", "scheduled_for", "trigger", "status", "skip_reason", "attempt", "replay_of",
                  "created_at", "started_at", "finished_at", "duration_ms", "response", "error",
                  "workflow_run_id", "upstream_executions", "job_version", "cancelled_at", "cancelled_by",
                  "defer_reason", "deferred_from", "jitter_seconds", "lateness_seconds"]
        read_only_fields = fields

    @extend_schema_field(ExecutionResponseSerializer)
    def get_response(self, execution):
        return _response(execution)

    @extend_schema_field(ExecutionErrorSerializer(allow_null=True))
    def get_error(self, execution):
        return _error(execution)

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_lateness_seconds(self, execution):
        return lateness.lateness_seconds(execution)


class ExecutionDetailSerializer(ExecutionSerializer):
    attempts = AttemptSerializer(many=True, read_only=True)

    class Meta(ExecutionSerializer.Meta):
        fields = [*ExecutionSerializer.Meta.fields, "attempts"]
        read_only_fields = fields


class BulkReplaySerializer(StrictSerializer):
    ids = serializers.ListField(child=serializers.UUIDField(), min_length=1, max_length=MAX_BULK_REPLAY,
                                help_text=f"Ids of dead executions, at most {MAX_BULK_REPLAY}.")


class BulkReplayResultSerializer(serializers.Serializer):
    replays = ExecutionSerializer(many=True)
