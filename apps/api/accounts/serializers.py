"""Serializers of the account endpoints: API keys, members, invitations, audit events."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.accounts.models import ApiKey, AuditEvent, Invitation, Membership

from apps.api.actor import RANK, Role
from apps.api.base import StrictModelSerializer
from .invitations import project_ids as invitation_project_ids
from .members import member_project_ids

PROJECTS_HELP = "Ids of the projects reachable; null means every project of the organization."


class ProjectIdsField(serializers.ListField):
    """null (every project) or a list of project ids of the caller's organization."""

    child = serializers.UUIDField()

    def __init__(self, reader, **kwargs):
        self.reader = reader  # instance -> None or project ids
        super().__init__(allow_null=True, required=False, help_text=PROJECTS_HELP, max_length=1000, **kwargs)

    def get_attribute(self, instance):
        return self.reader(instance)

    def to_internal_value(self, data):
        ids = set(super().to_internal_value(data))
        found = set(self.context["actor"].projects().filter(pk__in=ids).values_list("pk", flat=True))
        if found != ids:
            raise serializers.ValidationError("Unknown project ids: " + ", ".join(sorted(map(str, ids - found))),
                                              code="does_not_exist")
        return sorted(str(pk) for pk in ids)


class ApiKeySerializer(StrictModelSerializer):
    prefix = serializers.CharField(read_only=True, help_text="The visible start of the key.")
    scopes = serializers.ListField(
        child=serializers.ChoiceField(choices=ApiKey.Scope.choices), min_length=1, max_length=2,
        default=["read", "write"], help_text="`read`, or `read` and `write` (write implies read).",
    )
    projects = ProjectIdsField(reader=lambda key: (
        sorted(str(p.pk) for p in key.projects.all()) if key.limited_to_projects else None))
    created_by = serializers.EmailField(source="created_by.email", read_only=True, allow_null=True, default=None)

    class Meta:
        model = ApiKey
        fields = ["id", "name", "prefix", "scopes", "projects", "expires_at", "created_by",
                  "created_at", "last_used_at", "revoked_at"]
        read_only_fields = ["id", "created_at", "last_used_at", "revoked_at"]

    def validate_scopes(self, scopes):
        return ["read", "write"] if "write" in scopes else ["read"]

    def validate_expires_at(self, value):
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("Give an expiry in the future, or none.", code="in_the_past")
        return value


class NewApiKeySerializer(ApiKeySerializer):
    key = serializers.CharField(read_only=True, help_text="The full key. Shown once: store it now.")

    class Meta(ApiKeySerializer.Meta):
        fields = [*ApiKeySerializer.Meta.fields, "key"]


class MemberSerializer(StrictModelSerializer):
    id = serializers.UUIDField(source="user.id", read_only=True)
    email = serializers.EmailField(source="user.email", read_only=True)
    projects = ProjectIdsField(reader=member_project_ids)

    class Meta:
        model = Membership
        fields = ["id", "email", "role", "projects", "created_at"]
        read_only_fields = ["created_at"]

    def validate(self, attrs):
        return only_limited_roles_get_projects(attrs, self.instance)


def only_limited_roles_get_projects(attrs, instance):
    role = attrs.get("role", getattr(instance, "role", Role.DEVELOPER))
    if attrs.get("projects") is not None and RANK[role] >= RANK[Role.ADMIN]:
        raise serializers.ValidationError(
            {"projects": ["Owners and admins reach every project; limit developers and viewers only."]})
    return attrs


class InvitationSerializer(StrictModelSerializer):
    email = serializers.EmailField(max_length=254, help_text="Whom to invite; an account with this address "
                                                             "need not exist.")
    projects = ProjectIdsField(reader=invitation_project_ids)
    status = serializers.SerializerMethodField()
    invited_by = serializers.EmailField(source="invited_by.email", read_only=True, allow_null=True, default=None)

    class Meta:
        model = Invitation
        fields = ["id", "email", "role", "projects", "status", "invited_by", "created_at", "expires_at",
                  "last_sent_at", "send_count", "accepted_at", "revoked_at"]
        read_only_fields = ["id", "created_at", "expires_at", "last_sent_at", "send_count", "accepted_at",
                            "revoked_at"]

    @extend_schema_field(serializers.ChoiceField(choices=Invitation.Status.choices))
    def get_status(self, invitation):
        return invitation.status()

    def validate(self, attrs):
        return only_limited_roles_get_projects(attrs, None)


class AuditActorSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["user", "api_key", "system"])
    id = serializers.CharField(allow_null=True)
    name = serializers.CharField(allow_null=True, help_text="E-mail of the user, or the key's name and prefix.")


class AuditEventSerializer(serializers.ModelSerializer):
    actor = serializers.SerializerMethodField()

    class Meta:
        model = AuditEvent
        fields = ["id", "action", "target_type", "target_id", "data", "actor", "ip", "created_at"]

    @extend_schema_field(AuditActorSerializer)
    def get_actor(self, event):
        if event.actor_api_key_id:
            key = event.actor_api_key
            return {"type": "api_key", "id": str(key.pk), "name": f"{key.name} ({key.prefix}…)"}
        if event.actor_user_id:
            return {"type": "user", "id": str(event.actor_user_id), "name": event.actor_user.email}
        return {"type": "system", "id": None, "name": None}
