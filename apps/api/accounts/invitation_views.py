"""/api/v1/invitations/: invite an address, list, resend and revoke invitations (owners and
admins). Accepting happens on the invitation's page, signed in as the invited address."""

from django.db.models import Q
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ErrorDetail, ValidationError
from rest_framework.response import Response

from apps.accounts.models import Invitation
from apps.api.actor import Role
from apps.api.base import ApiViewMixin, EmptySerializer

from . import invitations
from .serializers import InvitationSerializer
from .views import ADMIN_ONLY, create_invitation, require_owner_for

STATUS_FILTER = OpenApiParameter("status", OpenApiTypes.STR, enum=Invitation.Status.values,
                                 description="Only invitations in this state.")


def _status_filter(name, now):
    open_ = Q(accepted_at__isnull=True, revoked_at__isnull=True)
    return {
        Invitation.Status.PENDING: open_ & Q(expires_at__gt=now),
        Invitation.Status.EXPIRED: open_ & Q(expires_at__lte=now),
        Invitation.Status.ACCEPTED: Q(accepted_at__isnull=False),
        Invitation.Status.REVOKED: Q(accepted_at__isnull=True, revoked_at__isnull=False),
    }.get(name)


@extend_schema_view(
    list=extend_schema(parameters=[STATUS_FILTER]),
    create=extend_schema(responses={201: InvitationSerializer}, description=(
        "E-mails the address a link that works once, for 7 days. The person becomes a member only by "
        "accepting it while signed in as that address (or by choosing a password there when they have no "
        "account). The answer is the same whether or not the address has an account. 409 `already_member` "
        "or `already_invited`; 429 `too_many_invitations` (with Retry-After) past the hourly limits per "
        "organization and per address.")),
    resend=extend_schema(request=EmptySerializer, responses=InvitationSerializer, description=(
        "A new link, valid 7 more days, is e-mailed; the previous link stops working. 409 "
        "`invitation_closed` once accepted or revoked.")),
    revoke=extend_schema(request=EmptySerializer, responses=InvitationSerializer, description=(
        "The link then answers `invitation_revoked`. Revoking twice changes nothing; 409 "
        "`invitation_closed` once accepted (remove the member instead).")),
)
class InvitationViewSet(ApiViewMixin, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin,
                        viewsets.GenericViewSet):
    """Invitations of the organization, newest first."""

    queryset = Invitation.objects.none()  # for the schema; get_queryset scopes the real one
    serializer_class = InvitationSerializer
    required_roles = {**ADMIN_ONLY, "resend": Role.ADMIN}
    filter_backends = []

    def get_queryset(self):
        queryset = (Invitation.objects.for_organization(self.actor.organization)
                    .select_related("invited_by", "organization").order_by("-created_at", "-pk"))
        wanted = self.request.query_params.get("status")
        if self.action != "list" or wanted is None:
            return queryset
        if wanted not in Invitation.Status.values:
            raise ValidationError({"status": [ErrorDetail(
                f"Give one of {', '.join(Invitation.Status.values)}.", code="invalid_choice")]})
        return queryset.filter(_status_filter(wanted, timezone.now()))

    def create(self, request, *args, **kwargs):
        invitation = create_invitation(self, request.data)
        return Response(self.get_serializer(invitation).data, status=status.HTTP_201_CREATED)

    @action(detail=True, methods=["post"])
    def resend(self, request, pk=None):
        invitation = self.get_object()
        EmptySerializer(data=request.data or {}).is_valid(raise_exception=True)
        require_owner_for(self.actor, invitation.role)
        invitations.resend(invitation, audit=self.audit)
        return Response(self.get_serializer(invitation).data)

    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        invitation = self.get_object()
        EmptySerializer(data=request.data or {}).is_valid(raise_exception=True)
        require_owner_for(self.actor, invitation.role)
        invitations.revoke(invitation, audit=self.audit)
        return Response(self.get_serializer(invitation).data)
