"""Page-number pages for the small lists, cursors (keyset, no COUNT) for the big ones."""

from functools import partial

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.paginator import Paginator
from django.db import models
from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination, PageNumberPagination

from .errors import InvalidCursor

MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 50


class PagePagination(PageNumberPagination):
    """Page numbers and the total ``count``. A view whose ``known_count()`` answers a number
    (a total the database keeps, such as an organization's job count) is not counted again
    by a COUNT over its rows; None means count them."""

    page_size = DEFAULT_PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE

    def paginate_queryset(self, queryset, request, view=None):
        known = view.known_count() if hasattr(view, "known_count") else None
        if known is not None:
            self.django_paginator_class = partial(_CountedPaginator, count=known)
        return super().paginate_queryset(queryset, request, view)


class _CountedPaginator(Paginator):
    def __init__(self, object_list, per_page, *, count, **kwargs):
        super().__init__(object_list, per_page, **kwargs)
        self.count = count  # in place of the cached property that would run COUNT


_TIMESTAMP = models.DateTimeField()


class NewestFirstCursorPagination(CursorPagination):
    """Keyset pagination on an indexed timestamp: constant cost at any depth."""

    page_size = DEFAULT_PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE
    ordering = ("-created_at", "-id")

    def decode_cursor(self, request):
        try:
            cursor = super().decode_cursor(request)
            if cursor is not None and cursor.position is not None:
                # A forged position would reach the database's comparison and fail there (a 500);
                # every ordering here starts with a timestamp.
                _TIMESTAMP.to_python(cursor.position)
            return cursor
        except (NotFound, DjangoValidationError):  # DRF answers 404 to a bad cursor; it is bad input
            raise InvalidCursor({"cursor": ["This cursor is not valid; start again from the first page."]}) from None


class ExecutionCursorPagination(NewestFirstCursorPagination):
    ordering = ("-scheduled_for", "-id")
