"""/api/v1/badges/: the organization's status badges (create, list, revoke), and the pieces
of a job's ``/api/v1/jobs/{id}/badge/`` (apps.executions.history.job_api)."""

from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import reverse
from drf_spectacular.utils import OpenApiExample, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.response import Response

from apps.accounts.audit import audited
from apps.api.base import ApiViewMixin, StrictSerializer
from apps.jobs.models import Job
from apps.projects.models import Project

from .models import Badge
from .state import badge_state


def badge_url(badge):
    return settings.SITE_URL + reverse("badge", kwargs={"token": badge.token})


class BadgeSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField(help_text="The public SVG image; anyone with the URL can see the state.")
    markdown = serializers.SerializerMethodField(help_text="Paste into a README.")
    state = serializers.SerializerMethodField(help_text="up, failing or paused, as the image shows it now.")

    class Meta:
        model = Badge
        fields = ["id", "job", "project", "url", "markdown", "state", "created_at"]
        read_only_fields = fields

    def get_url(self, badge) -> str:
        return badge_url(badge)

    def get_markdown(self, badge) -> str:
        return f"![cron status]({badge_url(badge)})"

    def get_state(self, badge) -> str:
        return badge_state(badge)


class BadgeCreateSerializer(StrictSerializer):
    job = serializers.PrimaryKeyRelatedField(queryset=Job.objects.none(), required=False)
    project = serializers.PrimaryKeyRelatedField(queryset=Project.objects.none(), required=False)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        actor = self.context.get("actor")
        if actor is None:  # the schema generator instantiates it without a request
            return
        # Another organization's ids are simply not found ("does_not_exist"): they leak nothing.
        self.fields["job"].queryset = actor.scope_to_projects(Job.objects.for_organization(actor.organization))
        self.fields["project"].queryset = actor.scope_to_projects(
            Project.objects.filter(organization=actor.organization), "pk")

    def validate(self, data):
        if bool(data.get("job")) == bool(data.get("project")):
            raise serializers.ValidationError("Give either a job or a project.", code="job_or_project")
        return data


@audited
def badge_for(*, job=None, project=None, audit):
    """The badge of ``job`` or ``project``, created when missing: (badge, created)."""
    target = {"job": job} if job is not None else {"project": project}
    organization = (job or project).organization_id
    existing = Badge.objects.filter(**target).first()
    if existing:
        return existing, False
    try:
        with transaction.atomic():
            badge = Badge.objects.create(organization_id=organization, **target)
    except IntegrityError:  # created by a concurrent request: the unique constraint decided
        return Badge.objects.get(**target), False
    audit("badge.create", job or project, {"badge": badge.pk})
    return badge, True


@audited
def revoke_badge(badge, *, audit):
    audit("badge.revoke", badge.job or badge.project, {"badge": badge.pk})
    badge.delete()


CREATE_EXAMPLE = OpenApiExample("A project's badge", request_only=True,
                                value={"project": "0190f5c2-7d1e-7c1a-9b1e-2f3a4b5c6d7e"})
BADGE_EXAMPLE = OpenApiExample("A badge", response_only=True, value={
    "id": 7, "job": "0190f5c2-7d1e-7c1a-9b1e-2f3a4b5c6d7e", "project": None,
    "url": "https://cron.example.com/badge/q8Zb0n3xXv1gHk2mP4rT7wYc.svg",
    "markdown": "![cron status](https://cron.example.com/badge/q8Zb0n3xXv1gHk2mP4rT7wYc.svg)",
    "state": "up", "created_at": "2026-11-29T21:00:00Z"})


@extend_schema_view(
    create=extend_schema(request=BadgeCreateSerializer, responses={200: BadgeSerializer, 201: BadgeSerializer},
                         examples=[CREATE_EXAMPLE, BADGE_EXAMPLE],
                         description="The status badge of a job or a project: an SVG at an unguessable public "
                                     "URL showing `up`, `failing` or `paused` (never a name). Answers 201 when "
                                     "created, 200 with the existing badge otherwise."),
    destroy=extend_schema(description="Revoke a badge: its URL answers 404 from then on; create a new one to "
                                      "get a new URL."),
)
class BadgeViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
                   viewsets.GenericViewSet):
    queryset = Badge.objects.none()  # for the schema; get_queryset scopes the real one
    serializer_class = BadgeSerializer
    filter_backends = []

    def get_queryset(self):
        badges = Badge.objects.for_organization(self.actor.organization).select_related("job")
        if self.actor.project_ids is None:
            return badges
        ids = self.actor.project_ids
        return badges.filter(job__project_id__in=ids) | badges.filter(project_id__in=ids)

    def create(self, request):
        serializer = BadgeCreateSerializer(data=request.data, context=self.get_serializer_context())
        serializer.is_valid(raise_exception=True)
        badge, created = badge_for(job=serializer.validated_data.get("job"),
                                   project=serializer.validated_data.get("project"), audit=self.audit)
        return Response(BadgeSerializer(badge).data, status=status.HTTP_201_CREATED if created else status.HTTP_200_OK)

    def perform_destroy(self, badge):
        revoke_badge(badge, audit=self.audit)
