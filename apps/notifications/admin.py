"""Operators see channels (never their secrets) and the notification and event logs."""

from django.contrib import admin

from apps.accounts.admin_helpers import HidesSecrets

from .models import Channel, EventSubscription, Notification, OutboxEvent


@admin.register(Channel)
class ChannelAdmin(HidesSecrets, admin.ModelAdmin):
    list_display = ["name", "kind", "project", "organization", "enabled", "created_at"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name", "project__name", "organization__name"]
    list_select_related = ["project", "organization"]
    raw_id_fields = ["organization", "project"]


@admin.register(EventSubscription)
class EventSubscriptionAdmin(HidesSecrets, admin.ModelAdmin):
    list_display = ["id", "project", "organization", "enabled", "created_at"]
    list_select_related = ["project", "organization"]
    raw_id_fields = ["organization", "project"]


class _LogAdmin(admin.ModelAdmin):
    show_full_result_count = False  # big tables: no exact count
    list_filter = ["status"]
    date_hierarchy = None

    def has_add_permission(self, request):
        return False


@admin.register(Notification)
class NotificationAdmin(_LogAdmin):
    list_display = ["created_at", "event", "subject", "channel_name", "organization", "status", "attempts"]
    list_select_related = ["organization"]
    raw_id_fields = ["organization", "project", "channel", "job"]
    readonly_fields = ["text", "data", "last_error"]


@admin.register(OutboxEvent)
class OutboxEventAdmin(_LogAdmin):
    list_display = ["created_at", "type", "execution_id", "organization", "status", "attempts"]
    list_select_related = ["organization"]
    raw_id_fields = ["organization", "subscription"]
    readonly_fields = ["payload", "last_error"]
