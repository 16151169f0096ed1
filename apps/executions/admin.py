from django.contrib import admin

from apps.accounts.admin_helpers import CappedCountPaginator, ReadOnlyAdmin

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
    list_filter = ["status", "trigger"]
    search_fields = ["=id", "=job__id"]
    list_select_related = ["job", "organization"]
    raw_id_fields = ["job", "organization", "replay_of"]
    # Millions of rows: never COUNT(*) the table to draw a page.
    show_full_result_count = False
    paginator = CappedCountPaginator
    list_per_page = 50
    inlines = [AttemptInline]


@admin.register(Attempt)
class AttemptAdmin(ReadOnlyAdmin):
    list_display = ["execution", "number", "started_at", "outcome", "response_status", "error_kind"]
    list_filter = ["outcome"]
    list_select_related = ["execution"]
    raw_id_fields = ["execution"]
    show_full_result_count = False
    paginator = CappedCountPaginator
