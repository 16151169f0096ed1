from django.contrib import admin

from .models import Badge


@admin.register(Badge)
class BadgeAdmin(admin.ModelAdmin):
    list_display = ["token", "organization", "job", "project", "created_at"]
    list_select_related = ["organization", "job", "project"]
    raw_id_fields = ["organization", "job", "project"]
    search_fields = ["token"]
