"""The notification pages: channels per project (add, edit, delete, test inline with
htmx), notification rules per project and per job, and the notification log.

Same roles and checks as the API (apps.notifications.services does the work for both):
developers and up edit the channels and rules of the projects they reach, viewers read;
another organization's ids are 404.
"""

from __future__ import annotations

from functools import partial

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from apps.api import ratelimit
from apps.api.audit import audit
from apps.jobs.models import Job
from apps.api.access import Role, member_view, require_role

from . import services
from .models import ALL_EVENTS, Channel, Event, Notification
from .rules import RULE_FIELDS, as_effective
from .validation import FIELDS, ConfigError, masked_config

LOG_PAGE_SIZE = 100
EVENT_LABELS = [(value, label) for value, label in Event.choices if value in ALL_EVENTS]


def _channels(request):
    channels = Channel.objects.for_organization(request.actor.organization).select_related("project")
    return request.actor.scope_to_projects(channels)


@member_view
def index(request):
    projects = list(request.actor.projects().order_by("name"))
    by_project = {project.pk: [] for project in projects}
    for channel in _channels(request).order_by("name"):
        masked = masked_config(channel.kind, channel.config)
        channel.summary = ", ".join(masked.get("to") or []) if channel.kind == "email" else (
            masked.get("url") or f"chat {masked.get('chat_id', '?')}")
        by_project.setdefault(channel.project_id, []).append(channel)
    for project in projects:
        project.channel_list = by_project.get(project.pk, [])
        project.rule_source, rule = services.rule_view(project)
        project.rule = as_effective(rule)
    return render(request, "web/notifications/index.html", {
        "projects": projects, "can_edit": request.actor.has_role(Role.DEVELOPER)})


def _form_values(request):
    config = {name: request.POST.get(f"config_{name}", "").strip() for name in
              {field for fields in FIELDS.values() for field in fields}}
    return {"name": request.POST.get("name", "").strip(), "kind": request.POST.get("kind", ""),
            "config": config, "events": request.POST.getlist("events"),
            "enabled": request.POST.get("enabled") == "on"}


def _channel_form(request, project, channel=None):
    errors = {}
    if request.method == "POST":
        values = _form_values(request)
        kind = channel.kind if channel else values["kind"]
        config = {k: v for k, v in values["config"].items() if k in FIELDS.get(kind, ()) and v}
        adding = channel is None
        channel = channel or Channel(project=project)
        try:
            channel = services.save_channel(channel, kind=kind, name=values["name"] or kind, config=config,
                                            events=values["events"] or None, enabled=values["enabled"],
                                            audit=partial(audit, request))
        except ConfigError as exc:
            errors = {exc.field.replace("config.", "config_"): [exc.message]}
        else:
            if adding and channel.kind == "webhook":
                messages.success(request, f"Channel “{channel.name}” added. Its signing secret (shown once): "
                                          f"{channel.config['secret']}")
            else:
                messages.success(request, f"Channel “{channel.name}” saved.")
            return redirect("web:notifications")
        if adding:
            channel = None
    values = request.POST if errors else None
    return render(request, "web/notifications/channel_form.html", {
        "project": project, "channel": channel, "errors": errors, "values": values,
        "masked": masked_config(channel.kind, channel.config) if channel else {},
        "kinds": Channel.Kind.choices, "fields": FIELDS, "events": EVENT_LABELS,
        "selected_events": (request.POST.getlist("events") if errors else (channel.events if channel else ALL_EVENTS)),
    }, status=400 if errors else 200)


@member_view(role=Role.DEVELOPER)
def channel_create(request, project_pk):
    project = get_object_or_404(request.actor.projects(), pk=project_pk)
    return _channel_form(request, project)


@member_view
def channel_edit(request, pk):
    channel = get_object_or_404(_channels(request), pk=pk)
    require_role(request, Role.DEVELOPER)
    return _channel_form(request, channel.project, channel)


@member_view
@require_POST
def channel_delete(request, pk):
    channel = get_object_or_404(_channels(request), pk=pk)
    require_role(request, Role.DEVELOPER)
    services.delete_channel(channel, audit=partial(audit, request))
    messages.success(request, f"Channel “{channel.name}” deleted.")
    return redirect("web:notifications")


@member_view
@require_POST
def channel_test(request, pk):
    channel = get_object_or_404(_channels(request), pk=pk)
    require_role(request, Role.DEVELOPER)
    wait = ratelimit.send_wait(address=f"channel:{channel.pk}", organization=channel.organization_id)
    if wait is not None:  # per channel and per organization (MAIL_PER_*_PER_HOUR)
        response = HttpResponse(f"Too many test messages: try again in {max(1, -(-wait // 60))} minutes.",
                                status=429, content_type="text/plain; charset=utf-8")
        response["Retry-After"] = str(wait)
        return response
    status, detail = services.test_channel(channel)
    # A test message changes nothing: a plain event, not an audited change.
    audit(request, "channel.test", channel, {"status": status})
    if not request.headers.get("HX-Request"):  # without JavaScript: the answer as a message
        (messages.success if status == "sent" else messages.error)(
            request, f"Test message to “{channel.name}”: {status} — {detail}")
        return redirect("web:notifications")
    return render(request, "web/notifications/_test_result.html", {"status": status, "detail": detail,
                                                                    "channel": channel})


def _rule_form(request, project, job=None):
    errors = {}
    if request.method == "POST":
        require_role(request, Role.DEVELOPER)
        if job is not None and request.POST.get("inherit") == "on":
            services.clear_job_rule(job, audit=partial(audit, request))
            messages.success(request, "The job now follows its project's notification rule.")
            return redirect("web:job_detail", pk=job.pk)
        values = {name: request.POST.get(name, "").strip() for name in RULE_FIELDS}
        values["notify_recovery"] = request.POST.get("notify_recovery") == "on"
        values["notify_disabled"] = request.POST.get("notify_disabled") == "on"
        try:
            services.set_rule(project, job, values, reported={"fields": sorted(values)},
                              audit=partial(audit, request))
        except ConfigError as exc:
            errors = {exc.field: [exc.message]}
        else:
            messages.success(request, "Notification rule saved.")
            return redirect("web:job_detail", pk=job.pk) if job else redirect("web:notifications")
    source, rule = services.rule_view(project, job)
    return render(request, "web/notifications/rule_form.html", {
        "project": project, "job": job, "source": source, "rule": as_effective(rule), "errors": errors,
        "values": request.POST if errors else None, "can_edit": request.actor.has_role(Role.DEVELOPER),
    }, status=400 if errors else 200)


@member_view
def project_rule(request, project_pk):
    project = get_object_or_404(request.actor.projects(), pk=project_pk)
    return _rule_form(request, project)


@member_view
def job_rule(request, pk):
    jobs = request.actor.scope_to_projects(Job.objects.for_organization(request.actor.organization))
    job = get_object_or_404(jobs.select_related("project"), pk=pk)
    return _rule_form(request, job.project, job)


@member_view
def log(request):
    rows = Notification.objects.for_organization(request.actor.organization).select_related("project", "job")
    if request.actor.project_ids is not None:
        rows = rows.filter(project__in=request.actor.project_ids)
    projects = list(request.actor.projects().order_by("name"))
    chosen = request.GET.get("project", "")
    if chosen and any(str(p.pk) == chosen for p in projects):
        rows = rows.filter(project_id=chosen)
    status = request.GET.get("status", "")
    if status in Notification.Status.values:
        rows = rows.filter(status=status)
    return render(request, "web/notifications/log.html", {
        "rows": rows.order_by("-created_at")[:LOG_PAGE_SIZE], "projects": projects, "chosen": chosen,
        "status": status, "statuses": Notification.Status.choices})
