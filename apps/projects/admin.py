from django.contrib import admin

from apps.accounts.admin_helpers import HidesSecrets

from .models import Project


@admin.register(Project)
class ProjectAdmin(HidesSecrets, admin.ModelAdmin):
    list_display = ["name", "slug", "organization", "timezone", "created_at"]
    search_fields = ["name", "slug", "organization__name"]
    list_select_related = ["organization"]
    raw_id_fields = ["organization"]
