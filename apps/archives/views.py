"""Settings → History archives: owners and admins list the parts the retention purge
archived and download them (the same roles and download as the API)."""

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render

from apps.api.access import Role, member_view

from .downloads import ArchivesUnavailable, archive_response
from .models import Archive

PAGE_SIZE = 50


@member_view(role=Role.ADMIN)
def archive_list(request):
    archives = Archive.objects.for_organization(request.actor.organization).order_by("-day", "-created_at", "-pk")
    page = Paginator(archives, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "web/settings/archives.html", {
        "page": page, "enabled": bool(settings.ARCHIVE_S3_BUCKET),
        "retention_days": request.actor.organization.plan.retention_days,
    })


@member_view(role=Role.ADMIN)
def archive_download(request, pk):
    archive = get_object_or_404(Archive.objects.for_organization(request.actor.organization), pk=pk)
    try:
        return archive_response(archive)
    except ArchivesUnavailable as exc:
        messages.error(request, str(exc))
        return redirect("archive_list")
