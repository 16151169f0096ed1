"""Filters shared by the API's list endpoints, and their backend."""

from datetime import timezone

import django_filters
from django_filters.rest_framework import DjangoFilterBackend
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


class FilterBackend(DjangoFilterBackend):
    """django-filter builds a filter set and its form (deep copies of every filter and form
    field) on every request, which costs more than a page's query. A request whose query
    string names none of the filters gets the queryset as it is: what every filter given
    no value returns anyway."""

    def filter_queryset(self, request, queryset, view):
        filterset_class = self.get_filterset_class(view, queryset)
        if filterset_class is not None and not names_a_filter(request.query_params, filterset_class):
            return queryset
        return super().filter_queryset(request, queryset, view)


def names_a_filter(query_params, filterset_class):
    """Whether any parameter is, or starts as, a filter's name (range filters read
    ``<name>_after``, ``<name>_min``, ...)."""
    names = tuple(filterset_class.base_filters)
    return any(key.startswith(names) for key in query_params)
