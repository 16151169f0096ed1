"""/api/v1/jobs/{id}/versions/: list, show, roll back (apps.jobs.versions)."""

from django.db import transaction
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.exceptions import ErrorDetail, NotFound, ValidationError
from rest_framework.response import Response

from apps.api.errors import Conflict
from apps.api.base import EmptySerializer

from . import validation, versions
from .models import JobVersion

NUMBER = r"versions/(?P<number>[0-9]{1,9})"


class VersionConflict(Conflict):
    default_code = "version_conflict"


class AuthorSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["user", "api_key", "operator"])
    id = serializers.CharField()
    name = serializers.CharField(help_text="The user's email or the API key's name.")


def author_of(version):
    """Who made a version, as cancelled_by names who cancelled a run (None: not known)."""
    if version.actor_api_key_id:
        return {"kind": "api_key", "id": str(version.actor_api_key_id), "name": version.actor_api_key.name}
    if version.actor_user_id:
        kind = "operator" if version.source == JobVersion.Source.ADMIN else "user"
        return {"kind": kind, "id": str(version.actor_user_id), "name": version.actor_user.email}
    return None


class JobVersionSerializer(serializers.ModelSerializer):
    author = serializers.SerializerMethodField()
    changes = serializers.DictField(read_only=True, help_text=(
        "{field: {from, to}} against the version before; empty for version 1. Secret fields (auth, secret_headers, "
        "script_env) show which secret, its values as ••••."))

    class Meta:
        model = JobVersion
        fields = ["number", "created_at", "source", "author", "rollback_of", "changes"]
        read_only_fields = fields

    @extend_schema_field(AuthorSerializer(allow_null=True))
    def get_author(self, version):
        return author_of(version)


class JobVersionDetailSerializer(JobVersionSerializer):
    snapshot = serializers.DictField(read_only=True, help_text=(
        "The job's definition at this version (model field names; `dependencies` its upstream jobs), "
        "secrets masked."))

    class Meta(JobVersionSerializer.Meta):
        fields = [*JobVersionSerializer.Meta.fields, "snapshot"]
        read_only_fields = fields


def _versions_of(job):
    return JobVersion.objects.filter(job_id=job.pk).select_related("actor_user", "actor_api_key")


def _version(job, number):
    version = _versions_of(job).filter(number=int(number)).first()
    if version is None:
        raise NotFound(f"This job has no version {number}.")
    return version


class JobVersionActions:
    """Mixed into JobViewSet: its get_object (tenancy, roles) finds the job."""

    @extend_schema(responses=JobVersionSerializer(many=True), description=(
        "The job's versions, newest first: every change of its definition (API, pages, admin, import, "
        "rollback) with who made it, when and the fields it changed. Executions name theirs (`job_version`)."))
    @action(detail=True, methods=["get"], url_path="versions", filter_backends=[])
    def versions(self, request, pk=None):
        job = self.get_object()
        page = self.paginate_queryset(_versions_of(job).order_by("-number"))
        return self.get_paginated_response(JobVersionSerializer(page, many=True).data)

    @extend_schema(responses=JobVersionDetailSerializer, description="One version, with the job's definition then.")
    @action(detail=True, methods=["get"], url_path=NUMBER, filter_backends=[], pagination_class=None)
    def version(self, request, pk=None, number=None):
        return Response(JobVersionDetailSerializer(_version(self.get_object(), number)).data)

    @extend_schema(request=EmptySerializer, responses={201: JobVersionDetailSerializer, 200: JobVersionDetailSerializer},
                   description=(
        "Make this version's definition the job's again. The rollback is a new version (201, source "
        "`rollback`, `rollback_of` this number) and audit-logged; 200 with the current version when the job "
        "already has that definition. Validated as an edit: 400 with the usual codes, 402 `plan_limit` when "
        "the plan no longer allows it, 409 `version_conflict` when its project or an upstream job is gone."))
    @action(detail=True, methods=["post"], url_path=f"{NUMBER}/rollback", filter_backends=[], pagination_class=None)
    def rollback(self, request, pk=None, number=None):
        from .serializers import plan_limit_error

        job = self.get_object()
        EmptySerializer(data=request.data or {}).is_valid(raise_exception=True)
        version = _version(job, number)
        author = versions.Author(user=self.actor.user, api_key=self.actor.api_key)
        try:
            with transaction.atomic():  # the rollback and its audit event commit together
                new = versions.rollback(job, version, author=author, plan=self.actor.organization.plan)
                if new is not None:
                    self.audit("job.rollback", job, {"to_version": version.number, "version": new.number})
        except versions.VersionConflict as exc:
            raise VersionConflict(exc.message) from None
        except validation.JobInvalid as exc:
            raise ValidationError({p.field: [ErrorDetail(p.message, code=p.code)] for p in exc.problems}) from None
        except validation.PlanLimit as exc:
            raise plan_limit_error(exc) from None
        current = new or _version(job, job.version)
        return Response(JobVersionDetailSerializer(current).data,
                        status=status.HTTP_201_CREATED if new else status.HTTP_200_OK)
