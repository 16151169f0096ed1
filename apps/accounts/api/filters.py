"""Filters shared by the API's list endpoints."""

from datetime import timezone

import django_filters
from rest_framework.exceptions import ErrorDetail, ValidationError


class UtcDateTimeFromToRangeFilter(django_filters.IsoDateTimeFromToRangeFilter):
    """``<name>_after`` / ``<name>_before`` as ISO 8601, turned into UTC before the query:
    PostgreSQL refuses offsets past ±15:59 that ISO 8601 (and Python) accept."""

    def filter(self, qs, value):
        if value:
            value = slice(self._utc(value.start, "after"), self._utc(value.stop, "before"))
        return super().filter(qs, value)

    def _utc(self, moment, suffix):
        try:
            return None if moment is None else moment.astimezone(timezone.utc)
        except OverflowError:
            name = f"{self.field_name}_{suffix}"
            raise ValidationError({name: [ErrorDetail(f"{name}: give a time within years 1 to 9999 (UTC).",
                                                      code="out_of_range")]}) from None
