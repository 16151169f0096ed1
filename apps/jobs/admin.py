from django.contrib import admin

from . import services
from .models import Job


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["name", "organization", "project", "schedule_type", "cron_expression", "enabled",
                    "next_run_at", "last_status", "consecutive_failures"]
    list_filter = ["enabled", "schedule_type", "last_status", "misfire_policy", "overlap_policy"]
    search_fields = ["name", "url", "organization__name", "project__name"]
    list_select_related = ["organization", "project"]
    raw_id_fields = ["organization", "project"]
    readonly_fields = ["id", "next_run_at", "last_run_at", "last_status", "consecutive_failures",
                       "expired_at", "created_at", "updated_at"]
    show_full_result_count = False
    actions = ["pause", "resume"]

    @admin.action(description="Pause the selected jobs")
    def pause(self, request, queryset):
        for job in queryset.filter(enabled=True):
            services.pause_job(job, reason="Paused by an operator")
        self.message_user(request, "Paused the selected jobs.")

    @admin.action(description="Resume the selected jobs")
    def resume(self, request, queryset):
        for job in queryset.filter(enabled=False):
            services.resume_job(job)
        self.message_user(request, "Resumed the selected jobs.")
