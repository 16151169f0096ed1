"""Admin helpers: very large tables, read-only tables."""

from django.contrib import admin
from django.core.paginator import Paginator
from django.utils.functional import cached_property

COUNT_CAP = 10_000


class CappedCountPaginator(Paginator):
    """Counts at most COUNT_CAP rows (a LIMIT inside the count), so a changelist over
    millions of executions never pays for an exact COUNT(*)."""

    @cached_property
    def count(self):
        return self.object_list[: COUNT_CAP + 1].count()


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows the platform alone writes and deletes: listed and shown, never edited."""

    show_full_result_count = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
