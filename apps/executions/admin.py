from django.contrib import admin, messages

from apps.accounts.admin_helpers import CappedCountPaginator, ReadOnlyAdmin
from apps.accounts.audit import audit_by

from . import cancelling
from .models import Attempt, Execution


class AttemptInline(admin.TabularInline):
    model = Attempt
    extra = 0
    fields = ["number", "started_at", "duration_ms", "outcome", "response_status", "error_kind", "error_message"]
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Execution)
class ExecutionAdmin(ReadOnlyAdmin):
    list_display = ["id", "job", "organization", "scheduled_for", "trigger", "status", "attempt",
                    "response_status", "error_kind", "duration_ms"]
    list_filter = ["status", "trigger", "defer_reason"]
    search_fields = ["=id", "=job__id"]
    list_select_related = ["job", "organization"]
    raw_id_fields = ["job", "organization", "replay_of"]
    # Millions of rows: never COUNT(*) the table to draw a page.
    show_full_result_count = False
    paginator = CappedCountPaginator
    list_per_page = 50
    inlines = [AttemptInline]
    actions = ["cancel_executions"]

    def has_cancel_permission(self, request):
        # Runs are read-only here except for this one action.
        return request.user.has_perm("executions.change_execution")

    @admin.action(description="Cancel selected executions", permissions=["cancel"])
    def cancel_executions(self, request, queryset):
        """The API's and the pages' cancel (apps.executions.cancelling), recorded as the
        operator's, each with its audit event: a queued run never starts, a running one's
        request is closed. Runs already cancelled or finished are left as they are."""
        by = cancelling.cancelled_by(user=request.user, operator=True)
        cancelled = 0
        for execution in queryset.filter(status__in=cancelling.UNFINISHED).select_related("organization"):
            try:
                cancelling.cancel(execution, by=by,
                                  audit=audit_by(execution.organization, user=request.user, operator=True))
            except (cancelling.ExecutionFinished, cancelling.ExecutionGone):  # since the list was read
                continue
            cancelled += 1
        self.message_user(request, f"Cancelled {cancelled} execution(s); the others selected had already "
                                   "finished or been cancelled and were left as they were.",
                          messages.SUCCESS if cancelled else messages.WARNING)


@admin.register(Attempt)
class AttemptAdmin(ReadOnlyAdmin):
    list_display = ["execution", "number", "started_at", "outcome", "response_status", "error_kind"]
    list_filter = ["outcome"]
    list_select_related = ["execution"]
    raw_id_fields = ["execution"]
    show_full_result_count = False
    paginator = CappedCountPaginator
