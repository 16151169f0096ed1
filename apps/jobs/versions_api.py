"""What /api/v1/jobs/{id}/versions/ answers (apps.jobs.versions): the versions' serializers and lookups."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import NotFound

from apps.api.errors import Conflict

from .models import JobVersion

NUMBER = r"versions/(?P<number>[0-9]{1,9})"


class VersionConflictResponse(Conflict):
    """The API's 409 for versions.VersionConflict."""

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


def versions_of(job):
    return JobVersion.objects.filter(job_id=job.pk).select_related("actor_user", "actor_api_key")


def version_of(job, number):
    version = versions_of(job).filter(number=int(number)).first()
    if version is None:
        raise NotFound(f"This job has no version {number}.")
    return version
