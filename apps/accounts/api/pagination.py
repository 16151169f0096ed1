"""Page-number pages for the small lists, cursors (keyset, no COUNT) for the big ones."""

from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination, PageNumberPagination

from .errors import InvalidCursor

MAX_PAGE_SIZE = 200
DEFAULT_PAGE_SIZE = 50


class PagePagination(PageNumberPagination):
    page_size = DEFAULT_PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE


class NewestFirstCursorPagination(CursorPagination):
    """Keyset pagination on an indexed timestamp: constant cost at any depth."""

    page_size = DEFAULT_PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = MAX_PAGE_SIZE
    ordering = ("-created_at", "-id")

    def decode_cursor(self, request):
        try:
            return super().decode_cursor(request)
        except NotFound:  # DRF answers 404 to a bad cursor; it is bad input
            raise InvalidCursor({"cursor": ["This cursor is not valid; start again from the first page."]}) from None


class ExecutionCursorPagination(NewestFirstCursorPagination):
    ordering = ("-scheduled_for", "-id")
