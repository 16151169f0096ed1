"""/api/v1/archives/: the organization's archived history (owners and admins): list the
parts the retention purge wrote, and download one."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import exceptions, serializers, status, viewsets
from rest_framework.decorators import action

from apps.api.actor import Role
from apps.api.base import ApiViewMixin
from apps.api.schema import error_openapi_response

from .downloads import ArchivesUnavailable, archive_response
from .models import Archive

ADMIN_ONLY = {name: Role.ADMIN for name in ("list", "retrieve", "download")}


class StorageUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "archive_storage_unavailable"
    default_detail = "The archive storage is not reachable; try again later."


class ArchiveSerializer(serializers.ModelSerializer):
    class Meta:
        model = Archive
        fields = ["id", "day", "rows", "bytes", "sha256", "key", "created_at"]
        read_only_fields = fields


class ArchiveViewSet(ApiViewMixin, viewsets.ReadOnlyModelViewSet):
    """Parts of the run history deleted by the retention purge, newest day first: gzip
    JSON Lines, one execution (with its attempts) per line."""

    queryset = Archive.objects.none()  # for the schema; get_queryset scopes the real one
    serializer_class = ArchiveSerializer
    required_roles = ADMIN_ONLY
    filter_backends = []

    def get_queryset(self):
        return Archive.objects.for_organization(self.actor.organization).order_by("-day", "-created_at", "-pk")

    @extend_schema(responses={
        (200, "application/gzip"): OpenApiResponse(description="The part (gzip JSON Lines), streamed."),
        302: OpenApiResponse(description="With ARCHIVE_PRESIGNED_DOWNLOADS: a presigned URL, valid a few minutes."),
        503: error_openapi_response("Archive storage not configured or not reachable (`archive_storage_unavailable`)."),
    })
    @action(detail=True, methods=["get"])
    def download(self, request, pk=None):
        archive = self.get_object()
        try:
            return archive_response(archive)
        except ArchivesUnavailable as exc:
            raise StorageUnavailable(str(exc)) from exc
