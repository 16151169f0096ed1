"""The monitors' pages: the list, and a monitor's detail with its ping URL and recent pings."""

from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_POST

from apps.web.access import Role, member_view, require_role

from . import services
from .models import Monitor
from .schedule import describe_monitor
from .serializers import ping_url

RECENT_PINGS = 50


def scoped_monitors(actor):
    return actor.scope_to_projects(Monitor.objects.for_organization(actor.organization).select_related("project"))


@member_view
@require_GET
def monitor_list(request):
    monitors = list(scoped_monitors(request.actor).order_by("name", "id")[:500])
    for monitor in monitors:
        monitor.schedule_text = describe_monitor(monitor)
    return render(request, "web/monitors/list.html", {"monitors": monitors})


@member_view
@require_GET
def monitor_detail(request, pk):
    monitor = get_object_or_404(scoped_monitors(request.actor), pk=pk)
    url = ping_url(monitor)
    context = {
        "monitor": monitor, "schedule_text": describe_monitor(monitor), "ping_url": url,
        "pings": monitor.pings.order_by("-created_at", "-id")[:RECENT_PINGS],
        "can_edit": request.actor.has_role(Role.DEVELOPER),
    }
    return render(request, "web/monitors/detail.html", context)


@member_view
@require_POST
def monitor_pause(request, pk):
    monitor = get_object_or_404(scoped_monitors(request.actor), pk=pk)
    require_role(request, Role.DEVELOPER)
    services.pause_monitor(monitor)
    return redirect("monitors:detail", pk=monitor.pk)


@member_view
@require_POST
def monitor_resume(request, pk):
    monitor = get_object_or_404(scoped_monitors(request.actor), pk=pk)
    require_role(request, Role.DEVELOPER)
    services.resume_monitor(monitor)
    return redirect("monitors:detail", pk=monitor.pk)
