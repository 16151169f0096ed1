from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ActionForm
from django.contrib.auth.admin import UserAdmin as BaseUserAdmin
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.plans.models import Plan

from . import invitations, services, sso
from .audit import audit_by
from .models import (ApiKey, AuditEvent, EncryptedTOTPDevice, ErasedOrganization, Invitation, Membership,
                     Organization, OrganizationSSO, SSOIdentity, User)


@admin.register(User)
class UserAdmin(BaseUserAdmin):
    ordering = ["email"]
    list_display = ["email", "first_name", "last_name", "is_staff", "is_active", "date_joined"]
    list_filter = ["is_staff", "is_superuser", "is_active"]
    search_fields = ["email", "first_name", "last_name"]
    fieldsets = [
        (None, {"fields": ["email", "password"]}),
        ("Personal info", {"fields": ["first_name", "last_name"]}),
        ("Permissions", {"fields": ["is_active", "is_staff", "is_superuser", "groups", "user_permissions"]}),
        ("Dates", {"fields": ["last_login", "date_joined"]}),
    ]
    add_fieldsets = [(None, {"classes": ["wide"], "fields": ["email", "password1", "password2"]})]


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


class PlanActionForm(ActionForm):
    plan = forms.ModelChoiceField(queryset=Plan.objects.all(), required=False, label="Plan")


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "plan", "suspended", "created_at"]
    list_filter = ["suspended", "plan"]
    search_fields = ["name", "slug", "memberships__user__email"]
    list_select_related = ["plan"]
    readonly_fields = ["id", "created_at", "suspended_at"]
    inlines = [MembershipInline]
    action_form = PlanActionForm
    actions = ["suspend", "unsuspend", "change_plan"]

    @admin.action(description="Suspend: stop their jobs and API keys")
    def suspend(self, request, queryset):
        for organization in queryset.filter(suspended=False):
            services.suspend_organization(organization, reason="Suspended by an operator",
                                          audit=audit_by(organization, user=request.user))
        self.message_user(request, "Suspended the selected organizations.")

    @admin.action(description="Unsuspend")
    def unsuspend(self, request, queryset):
        for organization in queryset.filter(suspended=True):
            services.unsuspend_organization(organization, audit=audit_by(organization, user=request.user))
        self.message_user(request, "Unsuspended the selected organizations.")

    @admin.action(description="Change plan to the plan chosen above")
    def change_plan(self, request, queryset):
        plan = Plan.objects.filter(pk=request.POST.get("plan") or None).first()
        if plan is None:
            self.message_user(request, "Choose a plan in the field beside the action.", messages.ERROR)
            return
        for organization in queryset.select_related("plan"):
            services.change_plan(organization, plan, audit=audit_by(organization, user=request.user))
        self.message_user(request, f"Moved the selected organizations to {plan}.")


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "organization", "role", "created_at"]
    list_filter = ["role"]
    search_fields = ["user__email", "organization__name"]
    list_select_related = ["user", "organization"]
    raw_id_fields = ["user", "organization"]


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    """Invitations are made on the members page or through the API (they are e-mailed);
    operators read, resend and revoke them here. The token is never shown (only its hash is kept)."""

    list_display = ["email", "organization", "role", "status_now", "invited_by", "created_at", "expires_at",
                    "accepted_at", "revoked_at"]
    list_filter = ["role"]
    search_fields = ["email", "organization__name", "organization__slug"]
    list_select_related = ["organization", "invited_by"]
    fields = ["email", "organization", "role", "limited_to_projects", "invited_by", "created_at", "expires_at",
              "last_sent_at", "send_count", "accepted_at", "accepted_by", "revoked_at"]
    readonly_fields = fields
    actions = ["resend", "revoke"]

    @admin.display(description="status")
    def status_now(self, obj):
        return obj.status().label

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.action(description="Resend: e-mail a new link (the old one stops working)")
    def resend(self, request, queryset):
        sent = 0
        for invitation in queryset.select_related("organization", "invited_by").filter(
                accepted_at__isnull=True, revoked_at__isnull=True):
            invitations.new_link(invitation, audit=audit_by(invitation.organization, user=request.user, operator=True))
            sent += 1
        self.message_user(request, f"Sent {sent} new invitation links.")

    @admin.action(description="Revoke the selected invitations")
    def revoke(self, request, queryset):
        for invitation in queryset.select_related("organization"):
            invitations.revoke(invitation, audit=audit_by(invitation.organization, user=request.user, operator=True))
        self.message_user(request, "Revoked the selected invitations.")


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["name", "prefix", "organization", "scopes", "created_at", "last_used_at", "expires_at", "revoked_at"]
    list_filter = ["revoked_at"]
    search_fields = ["name", "lookup", "organization__name"]
    list_select_related = ["organization"]
    raw_id_fields = ["organization", "created_by"]
    readonly_fields = ["id", "lookup", "salt", "secret_hash", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        # A key is only useful when its full value is shown once; that happens in the
        # API and pages, not here.
        return False

    @admin.action(description="Revoke the selected keys")
    def revoke(self, request, queryset):
        for api_key in queryset.select_related("organization").filter(revoked_at__isnull=True):
            services.revoke_api_key(api_key, audit=audit_by(api_key.organization, user=request.user))
        self.message_user(request, "Revoked the selected keys.")


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "organization", "action", "target_type", "target_id", "actor_user", "actor_api_key", "ip"]
    list_filter = ["action"]
    search_fields = ["action", "target_id", "organization__name"]
    list_select_related = ["organization", "actor_user", "actor_api_key"]
    raw_id_fields = ["organization", "actor_user", "actor_api_key"]
    show_full_result_count = False
    date_hierarchy = None

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class OrganizationSSOForm(forms.ModelForm):
    """The client secret is write-only: never shown, kept when the field is left empty."""

    client_secret = forms.CharField(required=False, strip=False, widget=forms.PasswordInput(render_value=False),
                                    help_text="Encrypted at rest. Leave empty to keep the current secret.")

    class Meta:
        model = OrganizationSSO
        fields = ["organization", "enabled", "required", "idp_enforces_mfa", "issuer", "client_id", "client_secret", "allowed_domains",
                  "default_role"]

    def clean_client_secret(self):
        secret = self.cleaned_data.get("client_secret") or (self.instance.client_secret if self.instance.pk else "")
        if not secret:
            raise forms.ValidationError("Give the client secret the provider showed.")
        return secret


@admin.register(OrganizationSSO)
class OrganizationSSOAdmin(admin.ModelAdmin):
    form = OrganizationSSOForm
    list_display = ["organization", "issuer", "client_id", "allowed_domains", "default_role", "enabled", "required",
                    "idp_enforces_mfa"]
    list_filter = ["enabled", "required", "idp_enforces_mfa"]
    search_fields = ["organization__name", "organization__slug", "issuer", "allowed_domains"]
    list_select_related = ["organization"]
    raw_id_fields = ["organization"]

    def save_model(self, request, obj, form, change):
        sso.save_configuration(obj, reported={"changed": form.changed_data},
                               audit=audit_by(obj.organization, user=request.user, operator=True))


@admin.register(SSOIdentity)
class SSOIdentityAdmin(admin.ModelAdmin):
    """Who is linked to which provider subject. Deleting a link lets the person connect again."""

    list_display = ["user", "issuer", "subject", "organization", "created_at", "last_login_at"]
    search_fields = ["user__email", "subject", "issuer", "organization__name"]
    list_select_related = ["user", "organization"]
    readonly_fields = ["user", "organization", "issuer", "subject", "created_at", "last_login_at"]

    def has_add_permission(self, request):
        return False


@admin.register(ErasedOrganization)
class ErasedOrganizationAdmin(admin.ModelAdmin):
    """The audit trail of deleted organizations: ids and dates only."""

    list_display = ("organization_id", "plan_code", "deletion_requested_at", "erased_at")
    readonly_fields = list_display

    def has_add_permission(self, request):
        return False


# django-otp's own TOTP admin creates devices with the seed in clear (and shows it): the
# encrypted model replaces it. otp_totp is listed before this app, so its admin is loaded.
if admin.site.is_registered(TOTPDevice):
    admin.site.unregister(TOTPDevice)


@admin.register(EncryptedTOTPDevice)
class EncryptedTOTPDeviceAdmin(admin.ModelAdmin):
    """Operators see who has two-factor on and can delete a lost device; the seed is
    never shown, and a device is only made by its user's own enrolment (scanning the code)."""

    list_display = ["user", "name", "confirmed", "created_at", "last_used_at"]
    list_filter = ["confirmed"]
    search_fields = ["user__email"]
    list_select_related = ["user"]
    fields = ["user", "name", "confirmed", "created_at", "last_used_at", "throttling_failure_count"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
