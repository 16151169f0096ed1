from django.contrib import admin

from apps.accounts.admin_helpers import ReadOnlyAdmin

from .models import OutboxEntry


@admin.register(OutboxEntry)
class OutboxEntryAdmin(ReadOnlyAdmin):
    """What waits to be published (an empty list is the normal state); the relay alone
    writes and deletes entries."""

    list_display = ["id", "stream_id", "kind", "status", "previous", "organization_id", "execution_id", "subject_id",
                    "occurred_at"]
    list_filter = ["kind", "status"]
