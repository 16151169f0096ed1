"""/api/v1/organization/...: the owner's data export and the organization's deletion (GDPR)."""

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.accounts import gdpr
from apps.accounts.audit import audit_by
from apps.accounts.models import DataExport

from apps.api.actor import Role
from apps.api.base import ApiViewMixin
from apps.api.errors import Conflict

OWNER_ONLY = {name: Role.OWNER for name in ("list", "retrieve", "create", "download")}


def require_owner(actor):
    """Owners only, as themselves: an API key cannot export or delete the organization."""
    if actor.user is None or not actor.has_role(Role.OWNER):
        raise PermissionDenied("Only an owner, logged in, may do this.")


class DataExportSerializer(serializers.ModelSerializer):
    class Meta:
        model = DataExport
        fields = ["id", "status", "size_bytes", "error", "created_at", "finished_at"]
        read_only_fields = fields


class DeletionSerializer(serializers.Serializer):
    erase_after = serializers.DateTimeField(allow_null=True,
                                            help_text="When the data will be erased; null: no deletion pending.")


class DataExportViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                        mixins.CreateModelMixin, viewsets.GenericViewSet):
    """All the organization's data as gzip-compressed JSON, built in the background."""

    queryset = DataExport.objects.none()
    serializer_class = DataExportSerializer
    required_roles = OWNER_ONLY
    filter_backends = []

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        require_owner(self.actor)

    def get_queryset(self):
        return DataExport.objects.for_organization(self.actor.organization).defer("archive")

    @extend_schema(request=None, responses={202: DataExportSerializer})
    def create(self, request, *args, **kwargs):
        export = gdpr.request_export(self.actor.organization, user=self.actor.user,
                                     audit=audit_by(self.actor.organization, user=self.actor.user))
        return Response(DataExportSerializer(export).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(responses={(200, "application/gzip"): OpenApiResponse(description="The JSON archive, gzipped.")})
    @action(detail=True, methods=["get"])
    def download(self, request, pk=None):
        export = self.get_object()
        if export.status != DataExport.Status.READY:
            raise Conflict("The export is not ready yet; poll its status.")
        archive = DataExport.objects.values_list("archive", flat=True).get(pk=export.pk)
        response = HttpResponse(bytes(archive), content_type="application/gzip")
        response["Content-Disposition"] = f'attachment; filename="cronsvc-export-{export.pk}.json.gz"'
        return response


class OrganizationDeletionView(ApiViewMixin, APIView):
    """POST: delete the organization (jobs stop now, data erased after the grace period);
    DELETE: cancel a pending deletion (the jobs it paused resume; those paused before stay
    paused); GET: when the data will be erased."""

    serializer_class = DeletionSerializer
    required_roles = {}

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        require_owner(self.actor)

    def _owners_audit(self):
        # the deletion's events name the owner alone, with no address (as the page's do)
        return audit_by(self.actor.organization, user=self.actor.user)

    @extend_schema(responses=DeletionSerializer)
    def get(self, request):
        return Response({"erase_after": self.actor.organization.erase_after})

    @extend_schema(request=None, responses={202: DeletionSerializer})
    def post(self, request):
        organization = gdpr.request_deletion(self.actor.organization, now=timezone.now(), audit=self._owners_audit())
        return Response({"erase_after": organization.erase_after}, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=None, responses={200: DeletionSerializer})  # a DELETE answers 204 unless told
    def delete(self, request):
        organization = gdpr.cancel_deletion(self.actor.organization, audit=self._owners_audit())
        return Response({"erase_after": organization.erase_after})
