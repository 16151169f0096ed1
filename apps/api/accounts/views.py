"""API keys, members, invitations and the audit log (owners and admins)."""

import django_filters
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import PermissionDenied
from rest_framework.response import Response

from apps.accounts.apikeys import create_api_key
from apps.accounts.models import ApiKey, AuditEvent, Membership
from apps.accounts.services import revoke_api_key

from . import invitations, members
from apps.api.actor import Role
from apps.api.base import ApiViewMixin, EmptySerializer
from apps.api.filters import FilterBackend, UtcDateTimeFromToRangeFilter
from apps.api.pagination import NewestFirstCursorPagination
from apps.api.throttling import KeyCreationIPThrottle

from .serializers import (
    ApiKeySerializer, AuditEventSerializer, InvitationSerializer, MemberSerializer, NewApiKeySerializer,
)

ADMIN_ONLY = {name: Role.ADMIN for name in
              ("list", "retrieve", "create", "update", "partial_update", "destroy", "revoke")}


@extend_schema_view(
    create=extend_schema(responses={201: NewApiKeySerializer},
                         description="The response holds the full key; it is never shown again."),
    revoke=extend_schema(request=EmptySerializer, responses=ApiKeySerializer),
)
class ApiKeyViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin,
                    mixins.CreateModelMixin, viewsets.GenericViewSet):
    queryset = ApiKey.objects.none()  # for the schema; get_queryset scopes the real one
    serializer_class = ApiKeySerializer
    required_roles = ADMIN_ONLY
    filter_backends = []

    def get_queryset(self):
        return (ApiKey.objects.for_organization(self.actor.organization)
                .select_related("created_by").prefetch_related("projects"))

    def get_throttles(self):
        throttles = super().get_throttles()
        return [*throttles, KeyCreationIPThrottle()] if self.action == "create" else throttles

    def create(self, request, *args, **kwargs):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        key, key.key = create_api_key(  # the full key only in this response (NewApiKeySerializer)
            self.actor.organization, data["name"], scopes=data["scopes"], created_by=self.actor.user,
            expires_at=data.get("expires_at"), project_ids=data.get("projects"), audit=self.audit)
        return Response(NewApiKeySerializer(key, context=self.get_serializer_context()).data,
                        status=status.HTTP_201_CREATED)

    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        key = self.get_object()
        EmptySerializer(data=request.data or {}).is_valid(raise_exception=True)
        revoke_api_key(key, audit=self.audit)
        return Response(self.get_serializer(key).data)


@extend_schema_view(create=extend_schema(
    request=InvitationSerializer, responses={202: InvitationSerializer},
    description="Invites the address (as POST /api/v1/invitations/ does) and answers 202 with the pending "
                "invitation: the person becomes a member only when they accept it, signed in as that address. "
                "The answer is the same whether or not the address has an account."))
class MemberViewSet(ApiViewMixin, viewsets.ModelViewSet):
    """Members of the organization; ``id`` is the user's id."""

    queryset = Membership.objects.none()  # for the schema; get_queryset scopes the real one
    serializer_class = MemberSerializer
    required_roles = ADMIN_ONLY
    filter_backends = []
    lookup_field = "user__id"
    lookup_url_kwarg = "id"
    lookup_value_regex = "[^/]+"

    def get_queryset(self):
        return Membership.objects.for_organization(self.actor.organization).select_related(
            "user", "organization").order_by("created_at", "pk")

    def get_serializer_class(self):
        return InvitationSerializer if self.action == "create" else MemberSerializer

    def create(self, request, *args, **kwargs):
        invitation = create_invitation(self, request.data)
        return Response(InvitationSerializer(invitation, context=self.get_serializer_context()).data,
                        status=status.HTTP_202_ACCEPTED)

    def perform_update(self, serializer):
        membership, data = serializer.instance, serializer.validated_data
        require_owner_for(self.actor, membership.role, data.get("role"))
        projects = data["projects"] if "projects" in data else ...
        members.change(membership, role=data.get("role"), project_ids=projects, audit=self.audit)

    def perform_destroy(self, membership):
        require_owner_for(self.actor, membership.role)
        members.remove(membership, audit=self.audit)


def require_owner_for(actor, *roles):
    """Only owners grant, change or remove the owner role (and invite owners)."""
    if Role.OWNER in roles and not actor.has_role(Role.OWNER):
        raise PermissionDenied("Only an owner can grant, change or remove the owner role.")


def create_invitation(view, data):
    """The invitation of a POST to /invitations/ or /members/, audited."""
    serializer = InvitationSerializer(data=data, context=view.get_serializer_context())
    serializer.is_valid(raise_exception=True)
    data = serializer.validated_data
    require_owner_for(view.actor, data.get("role"))
    return invitations.invite(view.actor.organization, email=data["email"], role=data.get("role", Role.DEVELOPER),
                              project_ids=data.get("projects"), invited_by=view.actor.user, audit=view.audit)


class AuditEventFilter(django_filters.FilterSet):
    created_at = UtcDateTimeFromToRangeFilter()

    class Meta:
        model = AuditEvent
        fields = ["action", "target_type", "target_id", "created_at"]


class AuditEventViewSet(ApiViewMixin, viewsets.ReadOnlyModelViewSet):
    """The organization's audit log, newest first (owners and admins)."""

    queryset = AuditEvent.objects.none()  # for the schema; get_queryset scopes the real one
    serializer_class = AuditEventSerializer
    required_roles = ADMIN_ONLY
    pagination_class = NewestFirstCursorPagination
    filter_backends = [FilterBackend]  # the cursor fixes the order
    filterset_class = AuditEventFilter

    def get_queryset(self):
        return AuditEvent.objects.for_organization(self.actor.organization).select_related(
            "actor_user", "actor_api_key")
