"""Admin helpers: very large tables, read-only tables, secret fields."""

from django.contrib import admin
from django.core.paginator import Paginator
from django.utils.functional import cached_property

from cronsvc import secrets

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


class HidesSecrets:
    """Mixed into a ModelAdmin: the model's secret fields (those the registry of secrets,
    cronsvc.secrets, declares) are left out of its change form, so an operator's page never
    shows them; the customer's API and pages set them."""

    def get_exclude(self, request, obj=None):
        return [*(super().get_exclude(request, obj) or ()), *secrets.secrets_of(self.model._meta.label)]
