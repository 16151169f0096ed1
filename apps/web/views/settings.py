"""Settings: organization and projects, members and roles, API keys, signing secrets,
plan and usage, and the organization switcher.

Projects, members and API keys are validated by the REST API's serializers and changed
by the same functions as the API (apps.api.accounts.members, provisioning.create_api_key,
services.revoke_api_key), with the same roles: owners and admins manage, only owners
touch the owner role.
"""

import time
import uuid
from functools import partial

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST
from rest_framework.exceptions import Throttled, ValidationError

from apps.api.accounts import invitations as invitation_rules
from apps.api.accounts import members as member_rules
from apps.api.audit import audit, client_ip
from apps.api.errors import Conflict, flatten
from apps.api.params import flag
from apps.api.accounts.serializers import ApiKeySerializer, InvitationSerializer, MemberSerializer
from apps.api.throttling import count_hit
from apps.accounts import gdpr, otp_views
from apps.accounts.models import ApiKey, DataExport, Invitation, Membership
from apps.accounts.audit import audit_by
from apps.accounts.services import rename_organization, revoke_api_key
from apps.billing.views import usage_context
from apps.jobs.forms import local_instant
from apps.jobs.queries import job_count
from apps.projects.api import ProjectSerializer
from apps.projects.services import (create_project, delete_project, end_signing_secret_rotation,
                                   rotate_signing_secret, update_project)
from apps.accounts.apikeys import create_api_key
from cronsvc.schedules.describe import format_duration
from cronsvc.schedules.localtime import zone_name

from apps.accounts.signin_scope import scope_of
from apps.api.access import SESSION_KEY, Role, member_view, require_role
from apps.api.actor import session_membership
from apps.api.pages import TIMEZONES, serializer_context


def _errors(serializer):
    return flatten(serializer.errors)


# --- organization and projects


def _project_data(post):
    """The project form as the API's body; the timezone typed in any case is accepted."""
    data = {key: post.get(key, "").strip() for key in ("name", "slug", "timezone")}
    data["timezone"] = zone_name(data["timezone"])
    return data


@member_view
def organization(request):
    actor = request.actor
    projects = actor.projects().annotate(job_count=Count("jobs")).order_by("name")
    context = {"projects": projects, "timezones": TIMEZONES, "can_admin": actor.has_role(Role.ADMIN),
               "errors": {}, "values": {"timezone": "UTC"}, "organization": actor.organization}
    return render(request, "web/settings/organization.html", context)


@member_view(role=Role.ADMIN)
@require_POST
def organization_rename(request):
    name = request.POST.get("name", "").strip()
    org = request.actor.organization
    if not name or len(name) > 120:
        messages.error(request, "Give the organization a name of 1 to 120 characters.")
    else:
        rename_organization(org, name, audit=partial(audit, request))
        messages.success(request, "Organization renamed.")
    return redirect("web:settings")


@member_view(role=Role.ADMIN)
@require_POST
def project_create(request):
    data = _project_data(request.POST)
    data = {key: value for key, value in data.items() if value or key == "name"}
    serializer = ProjectSerializer(data=data, context=serializer_context(request))
    if serializer.is_valid():
        project = create_project(serializer, organization=request.actor.organization, audit=partial(audit, request))
        messages.success(request, f"Project “{project.name}” created.")
        return redirect("web:settings")
    actor = request.actor
    context = {"projects": actor.projects().annotate(job_count=Count("jobs")).order_by("name"),
               "timezones": TIMEZONES, "can_admin": True, "errors": _errors(serializer),
               "values": request.POST, "organization": actor.organization}
    return render(request, "web/settings/organization.html", context, status=400)


@member_view
def project_edit(request, pk):
    project = get_object_or_404(request.actor.projects(), pk=pk)
    require_role(request, Role.ADMIN)
    errors = {}
    if request.method == "POST":
        data = _project_data(request.POST)
        serializer = ProjectSerializer(project, data=data, partial=True, context=serializer_context(request))
        if serializer.is_valid():
            project = update_project(serializer, audit=partial(audit, request))
            messages.success(request, f"Project “{project.name}” saved.")
            return redirect("web:settings")
        errors = _errors(serializer)
    return render(request, "web/settings/project_edit.html",
                  {"project": project, "errors": errors, "timezones": TIMEZONES,
                   "values": request.POST if errors else {"name": project.name, "slug": project.slug,
                                                          "timezone": project.timezone},
                   "job_count": project.jobs.count()},
                  status=400 if errors else 200)


@member_view
@require_POST
def project_delete(request, pk):
    project = get_object_or_404(request.actor.projects(), pk=pk)
    require_role(request, Role.ADMIN)
    jobs = project.jobs.count()
    try:
        force = flag("force", request.POST.get("force"))  # the API's ?force=, one meaning
    except ValidationError as exc:
        messages.error(request, exc.detail["force"][0])
        return redirect("web:project_edit", pk=project.pk)
    if jobs and not force:
        messages.error(request, f"“{project.name}” still has {jobs} job{'s' if jobs != 1 else ''}: "
                                "tick “also delete its jobs” to delete them too.")
        return redirect("web:project_edit", pk=project.pk)
    delete_project(project, audit=partial(audit, request))  # its jobs' history goes after, in batches
    messages.success(request, f"Project “{project.name}” deleted.")
    return redirect("web:settings")


# --- signing secrets


def _masked_secret(secret):
    return secret[:10] + "…" if secret else ""


@member_view
def signing_secrets(request, pk):
    """Reveal (shown in this response only), rotate (new first, old kept until the end of
    the rotation), end the rotation (keep the newest)."""
    project = get_object_or_404(request.actor.projects(), pk=pk)
    require_role(request, Role.ADMIN)
    revealed = None
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "reveal":  # shows, changes nothing: a plain event
            revealed = list(project.signing_secrets or [])
            audit(request, "project.signing_secret.reveal", project)
        elif action == "rotate":
            revealed = [rotate_signing_secret(project, audit=partial(audit, request))]
            project.refresh_from_db(fields=["signing_secrets"])
            messages.success(request, "New secret made. Runs are signed with both until you end the rotation.")
        elif action == "end_rotation" and end_signing_secret_rotation(project, audit=partial(audit, request)):
            messages.success(request, "Rotation ended: runs are signed with the new secret only.")
            return redirect("web:signing_secrets", pk=project.pk)
    secrets = list(project.signing_secrets or [])
    return render(request, "web/settings/signing.html", {
        "project": project, "masked": [_masked_secret(s) for s in secrets], "rotating": len(secrets) > 1,
        "revealed": revealed,
    })


# --- members


def _require_owner_for(request, *roles):
    """Only owners grant, change or remove the owner role (as the API's MemberViewSet)."""
    if Role.OWNER in roles and not request.actor.has_role(Role.OWNER):
        raise PermissionDenied("Only an owner can grant, change or remove the owner role.")


def _members_context(request, errors=None, values=None):
    organization = request.actor.organization
    memberships = (Membership.objects.for_organization(organization).select_related("user")
                   .order_by("created_at", "pk"))
    rows = [{"membership": m, "projects": member_rules.member_project_ids(m)} for m in memberships]
    open_invitations = (Invitation.objects.for_organization(organization)
                        .filter(accepted_at__isnull=True, revoked_at__isnull=True)
                        .select_related("invited_by").order_by("-created_at"))
    return {"rows": rows, "invitations": open_invitations, "now": timezone.now(), "roles": Role.choices,
            "projects": request.actor.projects(), "errors": errors or {}, "values": values or {"role": Role.DEVELOPER},
            "is_owner": request.actor.has_role(Role.OWNER)}


@member_view(role=Role.ADMIN)
def members(request):
    return render(request, "web/settings/members.html", _members_context(request))


@member_view(role=Role.ADMIN)
@require_POST
def member_invite(request):
    """A pending invitation e-mailed to the address: no membership until they accept."""
    projects = [p for p in request.POST.getlist("projects") if p]
    data = {"email": request.POST.get("email", "").strip(), "role": request.POST.get("role", Role.DEVELOPER),
            "projects": projects or None}
    serializer = InvitationSerializer(data=data, context=serializer_context(request))
    if not serializer.is_valid():
        return render(request, "web/settings/members.html",
                      _members_context(request, _errors(serializer), request.POST), status=400)
    data = serializer.validated_data
    _require_owner_for(request, data.get("role"))
    try:
        invitation = invitation_rules.invite(request.actor.organization, email=data["email"],
                                             role=data.get("role", Role.DEVELOPER), project_ids=data.get("projects"),
                                             invited_by=request.user, audit=partial(audit, request))
    except (Conflict, Throttled) as exc:
        return render(request, "web/settings/members.html",
                      _members_context(request, {"email": [str(exc.detail)]}, request.POST), status=exc.status_code)
    messages.success(request, f"Invitation sent to {invitation.email} ({invitation.get_role_display().lower()}); "
                              "they become a member when they accept it.")
    return redirect("web:members")


def _invitation(request, pk):
    invitation = get_object_or_404(Invitation.objects.for_organization(request.actor.organization)
                                   .select_related("organization"), pk=pk)
    _require_owner_for(request, invitation.role)
    return invitation


@member_view(role=Role.ADMIN)
@require_POST
def invitation_resend(request, pk):
    return _on_invitation(request, pk, invitation_rules.resend,
                          "A new link was sent to {email}; the previous one no longer works.")


@member_view(role=Role.ADMIN)
@require_POST
def invitation_revoke(request, pk):
    return _on_invitation(request, pk, invitation_rules.revoke, "The invitation of {email} was revoked.")


def _on_invitation(request, pk, act, success):
    """Resend or revoke one of the organization's invitations; back to the members page."""
    invitation = _invitation(request, pk)
    try:
        act(invitation, audit=partial(audit, request))
    except (Conflict, Throttled) as exc:
        messages.error(request, str(exc.detail))
    else:
        messages.success(request, success.format(email=invitation.email))
    return redirect("web:members")


def _membership(request, user_id):
    return get_object_or_404(Membership.objects.for_organization(request.actor.organization)
                             .select_related("user"), user_id=user_id)


@member_view(role=Role.ADMIN)
@require_POST
def member_change(request, user_id):
    membership = _membership(request, user_id)
    serializer = MemberSerializer(membership, data={"role": request.POST.get("role", "")}, partial=True,
                                  context=serializer_context(request))
    if not serializer.is_valid():
        for message in flatten(serializer.errors).values():
            messages.error(request, " ".join(message))
        return redirect("web:members")
    role = serializer.validated_data["role"]
    _require_owner_for(request, membership.role, role)
    try:
        member_rules.change(membership, role=role, audit=partial(audit, request))
    except Conflict as exc:
        messages.error(request, str(exc.detail))
        return redirect("web:members")
    messages.success(request, f"{membership.user.email} is now {membership.get_role_display().lower()}.")
    return redirect("web:members")


@member_view(role=Role.ADMIN)
@require_POST
def member_remove(request, user_id):
    membership = _membership(request, user_id)
    _require_owner_for(request, membership.role)
    try:
        member_rules.remove(membership, audit=partial(audit, request))
    except Conflict as exc:
        messages.error(request, str(exc.detail))
        return redirect("web:members")
    messages.success(request, f"{membership.user.email} removed from the organization.")
    if membership.user_id == request.user.pk:
        request.session.pop(SESSION_KEY, None)
        return redirect("web:dashboard")
    return redirect("web:members")


# --- API keys


def _keys_context(request, **extra):
    keys = (ApiKey.objects.for_organization(request.actor.organization)
            .select_related("created_by").prefetch_related("projects").order_by("-created_at"))
    context = {"keys": keys, "projects": request.actor.projects(), "errors": {}, "values": {}, "new_key": None,
               "now": timezone.now()}
    context.update(extra)
    return context


@member_view(role=Role.ADMIN)
def api_keys(request):
    return render(request, "web/settings/api_keys.html", _keys_context(request))


@member_view(role=Role.ADMIN)
@require_POST
def api_key_create(request):
    """The full key is in this response only (rendered, not redirected)."""
    quota = count_hit(f"ip:{client_ip(request)}", settings.API_KEY_CREATE_PER_IP_PER_HOUR, window=3600,
                      now=time.time())  # the same counter as the API's KeyCreationIPThrottle
    if not quota.allowed:
        return render(request, "web/settings/api_keys.html", _keys_context(
            request, errors={"name": ["Too many API keys created from your address this hour; try again later."]},
            values=request.POST), status=429)
    projects = [p for p in request.POST.getlist("projects") if p]
    data = {"name": request.POST.get("name", "").strip(),
            "scopes": ["read", "write"] if request.POST.get("access", "write") == "write" else ["read"],
            "projects": projects or None}
    expires = request.POST.get("expires_at", "").strip()
    if expires:
        data["expires_at"] = local_instant(expires, "UTC")
    serializer = ApiKeySerializer(data=data, context=serializer_context(request))
    if not serializer.is_valid():
        return render(request, "web/settings/api_keys.html",
                      _keys_context(request, errors=_errors(serializer), values=request.POST), status=400)
    data = serializer.validated_data
    key, full_key = create_api_key(request.actor.organization, data["name"], scopes=data["scopes"],
                                   created_by=request.user, expires_at=data.get("expires_at"),
                                   project_ids=data.get("projects"), audit=partial(audit, request))
    return render(request, "web/settings/api_keys.html", _keys_context(request, new_key={"key": key,
                                                                                         "full": full_key}))


@member_view(role=Role.ADMIN)
@require_POST
def api_key_revoke(request, pk):
    key = get_object_or_404(ApiKey.objects.for_organization(request.actor.organization), pk=pk)
    if key.revoked_at is None:
        revoke_api_key(key, audit=audit_by(key.organization, user=request.user))
        messages.success(request, f"API key “{key.name}” revoked: it no longer works.")
    return redirect("web:api_keys")


# --- plan and usage


@member_view
def plan(request):
    organization = request.actor.organization
    plan = organization.plan
    jobs = job_count(organization.pk)
    # Usage comes from the meter (apps.executions.usage), not from counting executions: it counts
    # every attempt, survives the retention purge and costs one row read.
    return render(request, "web/settings/plan.html", {
        "plan": plan, "jobs": jobs, **usage_context(request),
        "jobs_percent": min(100, round(100 * jobs / plan.max_jobs)) if plan.max_jobs else 0,
        "min_interval": format_duration(plan.min_interval_seconds),
    })


# --- organization switcher


@member_view
@require_POST
def switch_organization(request):
    try:
        chosen = uuid.UUID(request.POST.get("organization", ""))
    except ValueError:
        chosen = None
    membership, refusal = (session_membership(request.user, scope_of(request), chosen, strict=True) if chosen
                           else (None, None))
    if refusal is not None:  # a member there, but this session's log-in does not reach it
        messages.error(request, f"{refusal.message} (code: {refusal.code})")
    elif membership is None:
        messages.error(request, "You are not a member of that organization.")
    else:
        request.session[SESSION_KEY] = str(membership.organization_id)
        messages.success(request, f"Now working in {membership.organization.name}.")
    return redirect("web:dashboard")


# --- data and security (two-factor, export, deletion)


@member_view
def data_and_security(request):
    organization = request.actor.organization
    is_owner = request.actor.role == Role.OWNER
    exports = DataExport.objects.for_organization(organization).defer("archive")[:5] if is_owner else []
    context = {"organization": organization, "is_owner": is_owner, "exports": exports,
               "two_factor": otp_views.has_two_factor(request.user),
               "grace_days": settings.ORG_DELETION_GRACE_DAYS}
    return render(request, "web/settings/data.html", context)


@member_view(role=Role.OWNER)
@require_POST
def data_export(request):
    gdpr.request_export(request.actor.organization, user=request.user,
                        audit=audit_by(request.actor.organization, user=request.user))
    messages.success(request, "Your export is being prepared; it appears below when ready.")
    return redirect("data_settings")


@member_view(role=Role.OWNER)
def data_export_download(request, pk):
    export = get_object_or_404(DataExport.objects.for_organization(request.actor.organization),
                               pk=pk, status=DataExport.Status.READY)
    response = HttpResponse(bytes(export.archive), content_type="application/gzip")
    response["Content-Disposition"] = f'attachment; filename="cronsvc-export-{export.pk}.json.gz"'
    return response


@member_view(role=Role.OWNER)
@require_POST
def organization_delete(request):
    organization = request.actor.organization
    if request.POST.get("action") == "cancel":
        gdpr.cancel_deletion(organization, audit=audit_by(organization, user=request.user))
        messages.success(request, "Deletion cancelled. The jobs it paused run again; jobs you had paused "
                                  "before stay paused.")
    elif request.POST.get("confirm", "").strip() == organization.name:
        gdpr.request_deletion(organization, now=timezone.now(), audit=audit_by(organization, user=request.user))
        messages.success(request, f"Every job is stopped; the data will be erased after "
                                  f"{settings.ORG_DELETION_GRACE_DAYS} days unless you cancel.")
    else:
        messages.error(request, "Type the organization's name to confirm.")
    return redirect("data_settings")
