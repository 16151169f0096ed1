from django.contrib import admin

from . import services
from .models import Monitor, Ping


@admin.register(Monitor)
class MonitorAdmin(admin.ModelAdmin):
    list_display = ["name", "organization", "project", "schedule_type", "state", "last_ping_at", "next_expected_at",
                    "deadline_at"]
    list_filter = ["state", "schedule_type"]
    search_fields = ["name", "ping_id", "organization__name", "project__name"]
    list_select_related = ["organization", "project"]
    raw_id_fields = ["organization", "project"]
    readonly_fields = ["id", "ping_id", "badge_token", "state", "last_ping_at", "last_ping_kind", "last_start_at",
                       "last_duration_ms", "next_expected_at", "deadline_at", "state_changed_at", "created_at",
                       "updated_at"]
    show_full_result_count = False
    actions = ["pause", "resume"]

    @admin.action(description="Pause the selected monitors")
    def pause(self, request, queryset):
        for monitor in queryset.exclude(state=Monitor.State.PAUSED):
            services.pause_monitor(monitor)
        self.message_user(request, "Paused the selected monitors.")

    @admin.action(description="Resume the selected monitors")
    def resume(self, request, queryset):
        for monitor in queryset.filter(state=Monitor.State.PAUSED):
            services.resume_monitor(monitor)
        self.message_user(request, "Resumed the selected monitors.")


@admin.register(Ping)
class PingAdmin(admin.ModelAdmin):
    list_display = ["monitor", "kind", "exit_code", "duration_ms", "method", "remote_addr", "created_at"]
    list_filter = ["kind"]
    list_select_related = ["monitor"]
    raw_id_fields = ["monitor"]
    show_full_result_count = False
