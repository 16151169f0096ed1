"""Admin helpers for very large tables."""

from django.core.paginator import Paginator
from django.utils.functional import cached_property

COUNT_CAP = 10_000


class CappedCountPaginator(Paginator):
    """Counts at most COUNT_CAP rows (a LIMIT inside the count), so a changelist over
    millions of executions never pays for an exact COUNT(*)."""

    @cached_property
    def count(self):
        return self.object_list[: COUNT_CAP + 1].count()
