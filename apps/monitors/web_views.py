"""The monitors' pages: the list, the form (create, edit), delete, and a monitor's detail
with its ping URL and recent pings. The form is validated by the API's MonitorSerializer and
changes go through apps.monitors.services, as the API's do."""

from django.contrib import messages
from functools import partial
from datetime import timedelta
from zoneinfo import ZoneInfo

from django.shortcuts import get_object_or_404, redirect, render
from django.templatetags.tz import do_timezone
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from apps.api.audit import audit
from apps.plans.limits import PlanLimit
from apps.api.access import Role, member_view, require_role
from apps.api.pages import TIMEZONES, serializer_context
from apps.jobs.clock_changes import mark_clock_changes
from apps.jobs.schedule_serializers import SchedulePreviewSerializer
from apps.jobs.forms import form_errors as schedule_errors
from cronsvc.ids import uuid_or_none
from cronsvc.schedules import describe, next_runs
from cronsvc.schedules.describe import format_duration

from . import forms, services
from .models import Monitor
from .schedule import describe_monitor
from .serializers import MonitorSerializer, ping_url

RECENT_PINGS = 50
PREVIEW_COUNT = 5
#: Period and grace presets of the form (seconds, as a person says it), as on Healthchecks.
PERIOD_PRESETS = (60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400)
GRACE_PRESETS = (60, 300, 900, 3600, 6 * 3600, 86400)


def scoped_monitors(actor):
    return actor.scope_to_projects(Monitor.objects.for_organization(actor.organization).select_related("project"))


@member_view
@require_GET
def monitor_list(request):
    monitors = list(scoped_monitors(request.actor).order_by("name", "id")[:500])
    for monitor in monitors:
        monitor.schedule_text = describe_monitor(monitor)
    return render(request, "web/monitors/list.html",
                  {"monitors": monitors, "can_edit": request.actor.has_role(Role.DEVELOPER), "now": timezone.now()})


@member_view
@require_GET
def monitor_detail(request, pk):
    monitor = get_object_or_404(scoped_monitors(request.actor), pk=pk)
    url = ping_url(monitor)
    context = {
        "monitor": monitor, "schedule_text": describe_monitor(monitor), "ping_url": url,
        "pings": monitor.pings.order_by("-created_at", "-id")[:RECENT_PINGS],
        "can_edit": request.actor.has_role(Role.DEVELOPER), "now": timezone.now(),
    }
    return render(request, "web/monitors/detail.html", context)


def _form_context(request, values, errors, monitor=None):
    return {"values": values, "errors": errors, "monitor": monitor, "projects": list(request.actor.projects()),
            "timezones": TIMEZONES, "schedule_types": Monitor.ScheduleType.choices,
            "period_presets": _presets(PERIOD_PRESETS), "grace_presets": _presets(GRACE_PRESETS),
            "error_count": sum(len(m) for m in errors.values())}


def _presets(seconds):
    return [(value, format_duration(value)) for value in seconds]


@member_view
@require_POST
def monitor_preview(request):
    """When the next pings of the schedule being typed are expected, and when silence turns
    the monitor down (htmx), in the monitor's timezone: the API's schedule rules."""
    schedule = dict(forms.monitor_data(request.POST)["schedule"])
    project = request.actor.projects().filter(pk=uuid_or_none(request.POST.get("project"))).first()
    schedule.setdefault("timezone", project.timezone if project else "UTC")
    serializer = SchedulePreviewSerializer(data={"schedule": schedule, "count": PREVIEW_COUNT},
                                           context=serializer_context(request))
    if not serializer.is_valid():
        return render(request, "web/monitors/_preview.html", {"errors": schedule_errors(serializer.errors)})
    parsed, now = serializer.validated_data["schedule"], timezone.now()
    grace = forms.grace_seconds(request.POST)
    runs = mark_clock_changes(next_runs(parsed, now, PREVIEW_COUNT), parsed.timezone, now)
    zone = ZoneInfo(parsed.timezone)
    for run in runs:  # |timezone's datetime: shown in the monitor's zone, not converted back
        run["down_after"] = do_timezone(run["at"] + timedelta(seconds=grace), zone) if grace else None
    return render(request, "web/monitors/_preview.html", {
        "errors": {}, "description": describe(parsed), "runs": runs, "grace": grace, "now": now})


def _render_form(request, errors, monitor=None):
    values = forms.posted_values(request.POST)
    return render(request, "web/monitors/form.html", _form_context(request, values, errors, monitor), status=400)


@member_view(role=Role.DEVELOPER)
def monitor_create(request):
    if request.method == "POST":
        serializer = MonitorSerializer(data=forms.monitor_data(request.POST), context=serializer_context(request))
        if not serializer.is_valid():
            return _render_form(request, forms.form_errors(serializer.errors))
        try:
            monitor = services.create_monitor(**serializer.validated_data, audit=partial(audit, request))
        except PlanLimit as exc:
            return _render_form(request, {forms.NON_FIELD: [exc.message]})
        messages.success(request, f"Monitor “{monitor.name}” created: ping its URL from your job.")
        return redirect("monitors:detail", pk=monitor.pk)
    project = request.actor.projects().filter(pk=uuid_or_none(request.GET.get("project"))).first()
    values = forms.default_values(project or request.actor.projects().first())
    return render(request, "web/monitors/form.html", _form_context(request, values, {}))


@member_view
def monitor_edit(request, pk):
    monitor = get_object_or_404(scoped_monitors(request.actor), pk=pk)
    require_role(request, Role.DEVELOPER)
    if request.method == "POST":
        serializer = MonitorSerializer(monitor, data=forms.monitor_data(request.POST),
                                       context=serializer_context(request))
        if not serializer.is_valid():
            return _render_form(request, forms.form_errors(serializer.errors), monitor)
        monitor = services.update_monitor(monitor, sent=serializer.validated_data, audit=partial(audit, request),
                                          **serializer.validated_data)
        messages.success(request, f"Monitor “{monitor.name}” saved.")
        return redirect("monitors:detail", pk=monitor.pk)
    return render(request, "web/monitors/form.html",
                  _form_context(request, forms.form_values(monitor), {}, monitor))


@member_view
def monitor_delete(request, pk):
    monitor = get_object_or_404(scoped_monitors(request.actor), pk=pk)
    require_role(request, Role.DEVELOPER)
    if request.method == "POST":
        name = monitor.name
        services.delete_monitor(monitor, audit=partial(audit, request))
        messages.success(request, f"Monitor “{name}” deleted.")
        return redirect("monitors:list")
    return render(request, "web/monitors/delete.html", {"monitor": monitor})


@member_view
@require_POST
def monitor_pause(request, pk):
    monitor = get_object_or_404(scoped_monitors(request.actor), pk=pk)
    require_role(request, Role.DEVELOPER)
    services.pause_monitor(monitor, audit=partial(audit, request))
    return redirect("monitors:detail", pk=monitor.pk)


@member_view
@require_POST
def monitor_resume(request, pk):
    monitor = get_object_or_404(scoped_monitors(request.actor), pk=pk)
    require_role(request, Role.DEVELOPER)
    services.resume_monitor(monitor, audit=partial(audit, request))
    return redirect("monitors:detail", pk=monitor.pk)
