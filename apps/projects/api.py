"""/api/v1/projects/: admins create, rename and delete projects; every member reads
the projects they reach."""

from django.db.models import Count
from django.utils.text import slugify
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import filters, serializers, viewsets
from rest_framework.exceptions import ErrorDetail

from apps.api.actor import Role
from apps.api.base import ApiViewMixin, StrictModelSerializer
from apps.api.errors import Conflict
from apps.api.params import query_flag
from cronsvc.schedules import ScheduleError
from cronsvc.schedules.localtime import load_zone

from .models import Project
from .services import create_project, delete_project, update_project


class ProjectNotEmpty(Conflict):
    default_detail = "The project still has jobs; delete them first or repeat with ?force=true."
    default_code = "project_not_empty"


class ProjectSerializer(StrictModelSerializer):
    slug = serializers.SlugField(max_length=80, required=False, help_text="Default: made from the name.")
    timezone = serializers.CharField(max_length=64, required=False,
                                     help_text="IANA name; the default timezone of the project's schedules.")
    job_count = serializers.SerializerMethodField()

    class Meta:
        model = Project
        fields = ["id", "name", "slug", "timezone", "job_count", "created_at"]
        read_only_fields = ["id", "created_at"]

    def validate_timezone(self, value):
        try:
            load_zone(value, "timezone")
        except ScheduleError as exc:
            raise serializers.ValidationError(exc.message, code=exc.code) from None
        return value

    def validate(self, attrs):
        organization = self.context["actor"].organization
        if "slug" in attrs or self.instance is None:
            attrs["slug"] = attrs.get("slug") or slugify(attrs.get("name", ""))[:80] or "project"
            taken = Project.objects.for_organization(organization).filter(slug=attrs["slug"])
            if self.instance is not None:
                taken = taken.exclude(pk=self.instance.pk)
            if taken.exists():
                raise serializers.ValidationError({"slug": [ErrorDetail(
                    "Another project of your organization has this slug; choose another.", code="unique")]})
        return attrs

    def get_job_count(self, project) -> int:
        annotated = getattr(project, "job_count", None)  # set on lists, one query for all
        return project.jobs.count() if annotated is None else annotated


FORCE = OpenApiParameter("force", bool, description="Delete the project's jobs too (default false).")


@extend_schema_view(destroy=extend_schema(parameters=[FORCE],
                                          description="A project with jobs needs ?force=true (409 otherwise)."))
class ProjectViewSet(ApiViewMixin, viewsets.ModelViewSet):
    queryset = Project.objects.none()  # for the schema; get_queryset scopes the real one
    serializer_class = ProjectSerializer
    required_roles = {"create": Role.ADMIN, "update": Role.ADMIN, "partial_update": Role.ADMIN,
                      "destroy": Role.ADMIN}
    filter_backends = [filters.SearchFilter, filters.OrderingFilter]
    search_fields = ["name", "slug"]
    ordering_fields = ["name", "created_at"]
    ordering = ["name", "id"]

    def get_queryset(self):
        return self.actor.projects().annotate(job_count=Count("jobs"))

    # Each change commits with its audit event, or neither does (apps.projects.services).
    def perform_create(self, serializer):
        create_project(serializer, organization=self.actor.organization, audit=self.audit)

    def perform_update(self, serializer):
        update_project(serializer, audit=self.audit)

    def perform_destroy(self, project):
        force = query_flag(self.request, "force")
        if project.jobs.exists() and not force:
            raise ProjectNotEmpty()
        delete_project(project, audit=self.audit)  # its jobs' history goes after, in batches
