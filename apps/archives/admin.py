"""Operators see every organization's archive parts and download one (read-only: a part
is the only copy of history already purged)."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.urls import path, reverse
from django.utils.html import format_html

from apps.accounts.admin_helpers import CappedCountPaginator, ReadOnlyAdmin

from .downloads import ArchivesUnavailable, archive_response
from .models import Archive


@admin.register(Archive)
class ArchiveAdmin(ReadOnlyAdmin):
    list_display = ["day", "organization", "rows", "bytes", "created_at", "download_link"]
    list_filter = ["day"]
    search_fields = ["=organization__id", "organization__name", "key"]
    list_select_related = ["organization"]
    raw_id_fields = ["organization"]
    readonly_fields = ["organization", "day", "key", "rows", "bytes", "sha256", "created_at", "download_link"]
    show_full_result_count = False
    paginator = CappedCountPaginator
    list_per_page = 50

    def get_urls(self):
        download = self.admin_site.admin_view(self.download_view)
        return [path("<uuid:pk>/download/", download, name="archives_archive_download"), *super().get_urls()]

    @admin.display(description="download")
    def download_link(self, archive):
        return format_html('<a href="{}">download</a>', reverse("admin:archives_archive_download", args=[archive.pk]))

    def download_view(self, request, pk):
        archive = get_object_or_404(Archive, pk=pk)
        if not self.has_view_permission(request, archive):
            raise PermissionDenied
        try:
            return archive_response(archive)
        except ArchivesUnavailable as exc:
            self.message_user(request, str(exc), level=messages.ERROR)
            return redirect("admin:archives_archive_changelist")
