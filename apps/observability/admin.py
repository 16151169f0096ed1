from django.contrib import admin

from .models import Heartbeat


@admin.register(Heartbeat)
class HeartbeatAdmin(admin.ModelAdmin):
    """The processes' heartbeats (read-only: the processes write them)."""

    list_display = ("kind", "name", "hostname", "pid", "started_at", "last_seen")
    list_filter = ("kind",)
    readonly_fields = ("key", "kind", "name", "hostname", "pid", "started_at", "last_seen", "detail")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
