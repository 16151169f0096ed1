from django.contrib import admin, messages

from apps.accounts.admin_helpers import ReadOnlyAdmin
from apps.executions.models import UsageMonth
from apps.plans.models import Plan

from .models import QuotaWarning, Statement
from .plan_change import apply_plan


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ["code", "name", "max_jobs", "min_interval_seconds", "monthly_executions", "over_quota", "queue",
                    "monthly_price_cents"]
    search_fields = ["code", "name"]
    actions = ["apply_limits"]

    @admin.action(description="Apply the plan's limits to its organizations (pause / resume jobs)")
    def apply_limits(self, request, queryset):
        """After editing a plan: pause the jobs it no longer allows, resume those it allows again."""
        paused = resumed = 0
        for plan in queryset:
            for organization in plan.organizations.all():
                change = apply_plan(organization, plan)
                paused, resumed = paused + len(change.paused), resumed + len(change.resumed)
        self.message_user(request, f"{paused} jobs paused, {resumed} resumed.", messages.SUCCESS)


class DeletableReadOnlyAdmin(ReadOnlyAdmin):
    """Written by the platform only, but an operator may delete rows (a test organization's
    statements, a warning to send again)."""

    def has_delete_permission(self, request, obj=None):
        return admin.ModelAdmin.has_delete_permission(self, request, obj)


@admin.register(Statement)
class StatementAdmin(DeletableReadOnlyAdmin):
    list_display = ["period", "organization", "plan_code", "runs", "overage_runs", "total_cents", "provider_reference",
                    "created_at"]
    list_filter = ["period", "plan_code"]
    search_fields = ["organization__name", "organization__slug"]
    list_select_related = ["organization"]
    date_hierarchy = "period"


@admin.register(UsageMonth)
class UsageMonthAdmin(DeletableReadOnlyAdmin):
    list_display = ["month", "organization", "runs", "quota", "updated_at"]
    list_filter = ["month"]
    search_fields = ["organization__name", "organization__slug"]
    list_select_related = ["organization"]


@admin.register(QuotaWarning)
class QuotaWarningAdmin(DeletableReadOnlyAdmin):
    list_display = ["month", "organization", "threshold", "runs", "quota", "created_at"]
    list_filter = ["month", "threshold"]
    list_select_related = ["organization"]
