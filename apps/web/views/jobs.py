"""Dashboard, job form (create, edit, schedule preview, test run), job detail and actions.

Every rule comes from the REST API's code: jobs are built into the API's JSON shape and
validated by JobSerializer (apps.jobs.forms does the translation), filtered with the
API's JobFilter, scoped by the API's Actor, and changed by the same services.
"""

import copy
import dataclasses
import time
from functools import partial
from zoneinfo import ZoneInfo

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.db.models import Count
from django.templatetags.tz import do_timezone
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

import cronsvc
from apps.api.audit import audit
from apps.api.errors import PlanLimitExceeded
from apps.executions.history.api import ExecutionFilter
from apps.executions.worker.batch import request_spec, success_criteria
from apps.executions.lateness import lateness_seconds, with_first_start
from apps.notifications.dispatch import mail_configured, unheard_projects
from apps.executions.history import stats
from apps.executions.models import Execution
from apps.executions.worker.outbound import send
from apps.executions.scheduling.triggers import trigger_now
from apps.jobs import forms as job_forms
from apps.jobs.api import JobFilter, runs_payload, validate_preview
from apps.jobs.windowing import job_next_runs
from apps.jobs.clock_changes import mark_clock_changes
from apps.jobs.models import Job, JobDependency, JobVersion
from apps.jobs.scheduling import job_schedule
from apps.jobs.schedule_serializers import NO_SCHEDULE_DESCRIPTION, SchedulePreviewSerializer
from apps.jobs.serializers import JobSerializer, plan_limit_error
from apps.jobs.services import create_job, delete_job, pause_job, resume_job, update_job
from apps.jobs.validation import PlanLimit
from apps.plans.models import Plan
from cronsvc.delivery.curl import curl_command
from cronsvc.delivery.errors import InvalidRequest
from cronsvc.delivery.masking import masked
from cronsvc.delivery.outcome import classify
from cronsvc.delivery.request import prepare, standard_variables
from cronsvc.ids import uuid7, uuid_or_none
from cronsvc.schedules import ScheduleError, describe, next_runs, validate_schedule
from cronsvc.schedules.describe import format_duration

from apps.badges.api import badge_url
from apps.badges.models import Badge

from .. import health
from ..script_runs import script_run
from apps.api import ratelimit
from apps.api.access import Role, member_view, require_role
from apps.api.middleware import takes_long_fields
from apps.api.pages import TIMEZONES, serializer_context

DASHBOARD_PAGE_SIZE = 100
DASHBOARD_MONITORS = 50
HISTORY_PAGE_SIZE = 20
TEST_RUN_MAX_TIMEOUT = 30.0
SCRIPT_TEST_RUN = ("A test run sends the HTTP request; a script runs only on a worker's sandbox. "
                   "Save the job, then use “Run now” on its page.")


def scoped_jobs(actor):
    """The jobs this actor reaches, as the API's JobViewSet.get_queryset."""
    jobs = Job.objects.for_organization(actor.organization).select_related("project", "organization__plan").with_due()
    return actor.scope_to_projects(jobs)


def get_job(request, pk):
    """The job, or 404 when it is not the actor's (whatever their role: ids leak nothing)."""
    return get_object_or_404(scoped_jobs(request.actor), pk=pk)


def is_htmx(request):
    return request.headers.get("HX-Request") == "true"


# --- dashboard


@member_view
@require_GET
def dashboard(request):
    actor = request.actor
    now = timezone.now()
    params = {key: request.GET.get(key, "").strip() for key in ("project", "status", "tag", "q")}
    projects = list(actor.projects())
    jobs = scoped_jobs(actor)
    all_tags = sorted({tag for tags in jobs.values_list("tags", flat=True) for tag in (tags or [])})
    filter_data = {"project": params["project"], "tag": params["tag"], "search": params["q"]}
    job_filter = JobFilter({k: v for k, v in filter_data.items() if v}, queryset=jobs)
    jobs = job_filter.qs if job_filter.is_valid() else jobs.none()
    if params["status"] in health.STATUSES:
        jobs = jobs.filter(health.health_filter(params["status"]))
    jobs = health.with_last_duration(jobs).order_by("project__name", "project_id", "name", "id")
    page = Paginator(jobs, DASHBOARD_PAGE_SIZE).get_page(request.GET.get("page"))
    rows = list(page.object_list)
    strips = health.success_strips(actor.organization, [job.pk for job in rows], now)
    groups = []
    for job in rows:
        job.health = health.job_health(job)
        job.strip = strips[job.pk]
        if not groups or groups[-1]["project"].pk != job.project_id:
            groups.append({"project": job.project, "jobs": []})
        groups[-1]["jobs"].append(job)
    context = {
        "groups": groups, "page": page, "projects": projects, "tags": all_tags, "params": params,
        "statuses": health.STATUSES, "now": now, "total": scoped_jobs(actor).count(),
        **_overview(actor),
        "can_edit": actor.has_role(Role.DEVELOPER),
        "query": request.GET.urlencode(),
    }
    if not is_htmx(request):
        context["unheard"] = {"projects": unheard_projects(projects), "mail": mail_configured()}
    template = "web/dashboard/_jobs.html" if is_htmx(request) else "web/dashboard/index.html"
    return render(request, template, context)


def _overview(actor):
    """One status overview of the jobs (by health) and the heartbeat monitors (by state,
    listed beside the jobs): what is wrong shows first."""
    from apps.monitors.web_views import scoped_monitors

    jobs = scoped_jobs(actor).aggregate(**{s: Count("pk", filter=health.health_filter(s)) for s in health.STATUSES})
    monitors = scoped_monitors(actor)
    by_state = dict(monitors.values_list("state").annotate(n=Count("pk")).order_by())
    order = ["down", "late", "new", "up", "paused"]
    return {
        "job_counts": [(s, jobs[s]) for s in ("failing", "disabled", "new", "healthy", "paused", "expired") if jobs[s]],
        "monitor_counts": [(s, by_state[s]) for s in order if by_state.get(s)],
        "monitors": sorted(monitors.order_by("name", "id")[:DASHBOARD_MONITORS],
                           key=lambda m: order.index(m.state) if m.state in order else len(order)),
        "monitor_total": sum(by_state.values()),
    }


# --- the job form


def _validate(serializer, request=None):
    """{form field: [messages]}: the serializer's refusals, as the API would give them, and
    the fields too long to be read whole (RequestLimitsMiddleware cut them)."""
    cut = getattr(request, "cut_fields", {})
    if cut:
        return {field: [f"Far too long: over {longest} characters arrived (and were cut). "
                        "Shorten it; nothing was saved."] for field, longest in cut.items()}
    try:
        if serializer.is_valid():
            return {}
        return job_forms.form_errors(serializer.errors)
    except PlanLimitExceeded as exc:
        return _plan_errors(exc)


def _plan_errors(exc):
    hint = ""
    plan_code = exc.extra.get("plan")
    if plan_code:
        plan = Plan.objects.filter(code=plan_code).first()
        hint = f" The {plan.name if plan else plan_code} plan allows it."
    if exc.fields:
        return job_forms.form_errors({path: [str(m) + hint for m in msgs] for path, msgs in exc.fields.items()})
    return {job_forms.NON_FIELD: [str(exc.detail) + hint]}


def _form_context(request, values, errors, job=None):
    actor = request.actor
    plan = actor.organization.plan
    return {
        "values": values, "errors": errors, "job": job,
        "projects": list(actor.projects()), "timezones": TIMEZONES,
        "methods": [(m, m) for m in Job.Method.values], "body_formats": Job.BodyFormat.choices,
        "misfire_policies": Job.MisfirePolicy.choices, "overlap_policies": Job.OverlapPolicy.choices,
        "outside_window_choices": Job.OutsideWindow.choices, "priorities": Job.Priority.choices,
        "regions": settings.REGIONS, "plan": plan,
        "plan_min_interval": format_duration(plan.min_interval_seconds),
        "upstream_choices": scoped_jobs(actor).exclude(pk=getattr(job, "pk", None)).order_by("project__name", "name"),
        "dependency_ons": JobDependency.On.choices, "dependency_modes": Job.DependencyMode.choices,
        "script_languages": Job.ScriptLanguage.choices,
        "error_count": sum(len(m) for m in errors.values()),
    }


@takes_long_fields
@member_view(role=Role.DEVELOPER)
def job_create(request):
    if request.method == "POST":
        data = job_forms.job_data(request.POST, regions=settings.REGIONS)
        serializer = JobSerializer(data=data, context=serializer_context(request))
        errors = _validate(serializer, request)
        if not errors:
            try:
                job = create_job(serializer.validated_data, actor=request.actor, source=JobVersion.Source.PAGE,
                                 audit=partial(audit, request))
            except PlanLimit as exc:
                errors = _plan_errors(plan_limit_error(exc))
            else:
                messages.success(request, f"Job “{job.name}” created.")
                return redirect("web:job_detail", pk=job.pk)
        values = job_forms.posted_values(request.POST)
        return render(request, "web/jobs/form.html", _form_context(request, values, errors), status=400)
    project = request.actor.projects().filter(pk=uuid_or_none(request.GET.get("project"))).first()
    values = job_forms.default_values(project or request.actor.projects().first())
    return render(request, "web/jobs/form.html", _form_context(request, values, {}))


@takes_long_fields
@member_view
def job_edit(request, pk):
    job = get_job(request, pk)
    require_role(request, Role.DEVELOPER)
    if request.method == "POST":
        data = job_forms.job_data(request.POST, stored_auth=job.auth, regions=settings.REGIONS)
        serializer = JobSerializer(job, data=data, context=serializer_context(request))
        errors = _validate(serializer, request)
        if not errors:
            job = update_job(job, serializer.validated_data, actor=request.actor, sent=data,
                             source=JobVersion.Source.PAGE, audit=partial(audit, request))
            messages.success(request, f"Job “{job.name}” saved.")
            return redirect("web:job_detail", pk=job.pk)
        values = job_forms.posted_values(request.POST, stored_auth=job.auth)
        return render(request, "web/jobs/form.html", _form_context(request, values, errors, job), status=400)
    return render(request, "web/jobs/form.html", _form_context(request, job_forms.form_values(job), {}, job))


@member_view
@require_POST
def schedule_preview(request):
    """The next 5 runs of the schedule being typed, with clock changes marked (htmx)."""
    project = request.actor.projects().filter(pk=uuid_or_none(request.POST.get("project"))).first()
    schedule = job_forms.schedule_data(request.POST)
    if schedule["type"] == "none":
        return render(request, "web/jobs/_preview.html", {"errors": {}, "runs": [], "no_schedule": True,
                                                          "description": NO_SCHEDULE_DESCRIPTION})
    if schedule.get("timezone") is None:
        schedule["timezone"] = project.timezone if project else "UTC"
    zone = schedule["timezone"]
    body = {"schedule": schedule, "count": 5,
            "start_at": job_forms.local_instant(request.POST.get("start_at", ""), zone),
            "end_at": job_forms.local_instant(request.POST.get("end_at", ""), zone)}
    if schedule["type"] == "interval":
        job = Job.objects.for_organization(request.actor.organization).filter(
            pk=uuid_or_none(request.POST.get("job"))).first()
        anchor = body["start_at"] or (job.created_at.isoformat() if job else None)
        if anchor:
            schedule["anchor"] = anchor
    context = {"runs": [], "errors": {}, "warning": None, "description": None}
    serializer = SchedulePreviewSerializer(data=body, context=serializer_context(request))
    if not serializer.is_valid():
        context["errors"] = job_forms.form_errors(serializer.errors)
        return render(request, "web/jobs/_preview.html", context)
    data = serializer.validated_data
    now = timezone.now()
    window = {"start_at": data.get("start_at"), "end_at": data.get("end_at")}
    parsed = data["schedule"]
    try:
        validate_preview(parsed, now, **window)
    except ScheduleError as exc:
        context["errors"] = job_forms.form_errors({exc.field: [exc.message]})
        return render(request, "web/jobs/_preview.html", context)
    plan = request.actor.organization.plan
    try:
        validate_schedule(parsed, now=now, min_interval_seconds=plan.min_interval_seconds, **window)
    except ScheduleError as exc:
        if exc.code == "interval_too_short":
            context["warning"] = (f"Your plan ({plan.name}) runs a job at most once every "
                                  f"{format_duration(plan.min_interval_seconds)}: this schedule will be refused.")
    runs = next_runs(parsed, now, data["count"], **window)
    context.update(description=describe(parsed), runs=mark_clock_changes(runs, parsed.timezone, now),
                   payload=runs_payload(parsed, runs))
    return render(request, "web/jobs/_preview.html", context)


def mark_window_places(placed, zone_name, now):
    """mark_clock_changes for occurrences placed by execution windows: a skipped one
    shown at its time and marked, a deferred one at its real time with its occurrence."""
    marked = mark_clock_changes([p.at or p.occurrence for p in placed], zone_name, now)
    zone = ZoneInfo(zone_name)
    for run, p in zip(marked, placed):
        run["skipped"] = p.at is None
        run["deferred_from"] = do_timezone(p.occurrence, zone) if p.at not in (None, p.occurrence) else None
    return marked


@takes_long_fields
@member_view(role=Role.DEVELOPER)
@require_POST
def test_run(request, pk=None):
    """Send the form's request once and show the response. Nothing is saved."""
    job = get_job(request, pk) if pk else None
    context = {"errors": {}, "result": None}
    count = ratelimit.hit("test-run", request.user.pk, window=60)
    if count > settings.TEST_RUNS_PER_MINUTE:
        context["errors"] = {job_forms.NON_FIELD: [
            f"At most {settings.TEST_RUNS_PER_MINUTE} test runs a minute; wait a moment."]}
        return render(request, "web/jobs/_test_run.html", context, status=429)
    data = job_forms.job_data(request.POST, stored_auth=job.auth if job else None, regions=settings.REGIONS)
    if data["kind"] == Job.Kind.SCRIPT:
        context["errors"] = {"kind": [SCRIPT_TEST_RUN]}
        return render(request, "web/jobs/_test_run.html", context)
    serializer = JobSerializer(job, data=data, context=serializer_context(request))
    context["errors"] = _validate(serializer, request)
    if context["errors"]:
        return render(request, "web/jobs/_test_run.html", context)
    candidate = copy.copy(job) if job else Job()
    for name, value in serializer.validated_data.items():
        setattr(candidate, name, value)
    context["result"] = send_test_request(candidate)
    return render(request, "web/jobs/_test_run.html", context)


def send_test_request(job):
    """One request as a run would send it (signed, templated), with a shorter deadline."""
    now = timezone.now()
    execution_id = uuid7()
    spec = request_spec(job)
    spec = dataclasses.replace(spec, timeout=min(spec.timeout, TEST_RUN_MAX_TIMEOUT),
                               connect_timeout=min(spec.connect_timeout, TEST_RUN_MAX_TIMEOUT))
    try:
        prepared = prepare(
            spec, variables=standard_variables(job_id=job.id, job_name=job.name, execution_id=execution_id,
                                               scheduled_for=now, attempt=1, now=now),
            job_id=job.id, execution_id=execution_id, attempt=1, scheduled_for=now,
            signing_secrets=job.project.signing_secrets, timestamp=int(time.time()), version=cronsvc.__version__,
        )
    except InvalidRequest as exc:
        return {"invalid": exc.message}
    result = send(prepared, max_body_bytes=settings.RESPONSE_BODY_MAX_BYTES)
    outcome = classify(result, success_criteria(job))
    return {
        "succeeded": outcome.succeeded, "error_kind": outcome.error_kind, "message": outcome.message,
        "status": result.status_code, "duration_ms": round(result.duration_ms),
        "headers": masked(result.headers), "body": result.body_excerpt,
        "truncated": result.body_truncated,
        "request": {"method": prepared.method, "url": prepared.url, "headers": masked(prepared.headers),
                    "body": prepared.body.decode("utf-8", errors="replace")},
    }


# --- job detail


@member_view
@require_GET
def job_detail(request, pk):
    job = get_job(request, pk)
    now = timezone.now()
    if job.schedule_type == Job.ScheduleType.NONE:  # started by its upstream jobs only
        schedule_text, upcoming = NO_SCHEDULE_DESCRIPTION, []
    else:
        schedule = job_schedule(job)
        schedule_text = describe(schedule)
        upcoming = job_next_runs(job, now, 5)
    job.health = health.job_health(job)
    context = {
        "job": job, "schedule_text": schedule_text, "now": now,
        "upstream_links": job.upstream_links.select_related("upstream").order_by("upstream__name"),
        "downstream_links": job.downstream_links.select_related("downstream").order_by("downstream__name"),
        "next_runs": mark_window_places(upcoming, job.timezone, now),
        "api": JobSerializer(job, context=serializer_context(request)).data,
        "can_edit": request.actor.has_role(Role.DEVELOPER),
        "ranges": list(stats.RANGES),
        **_badge_context(job),
        **_history_context(request, job),
        **_stats_context(job, request.GET.get("range", "24h"), now),
    }
    return render(request, "web/jobs/detail.html", context)


def _badge_context(job):
    badge = Badge.objects.filter(job=job).first()
    return {"badge": badge, "badge_url": badge_url(badge) if badge else None}


def _history_context(request, job):
    status = request.GET.get("status", "")
    executions = with_first_start(Execution.objects.for_organization(request.actor.organization).filter(job=job))
    if status in Execution.Status.values:
        executions = executions.filter(status=status)
    # The search box and the status code, read as the API reads ?q= and ?status_code=.
    search = {key: request.GET.get(key, "").strip() for key in ("q", "status_code")}
    found = ExecutionFilter({key: value for key, value in search.items() if value}, queryset=executions)
    search_errors = [] if found.is_valid() else [error for errors in found.errors.values() for error in errors]
    executions = executions.none() if search_errors else found.qs
    page = Paginator(executions.order_by("-scheduled_for", "-id"), HISTORY_PAGE_SIZE).get_page(
        request.GET.get("page"))
    for execution in page.object_list:  # jitter left out (apps/executions/lateness.py)
        late = lateness_seconds(execution)
        execution.lateness_ms = None if late is None else max(0, int(late * 1000))
    return {"history": page, "history_status": status, "execution_statuses": Execution.Status.choices,
            "history_search": search, "history_search_errors": search_errors,
            "can_edit": request.actor.has_role(Role.DEVELOPER)}


def _stats_context(job, range_name, now):
    range_name = range_name if range_name in stats.RANGES else "24h"
    return {"stats": stats.job_stats(job, range_name, now), "range": range_name}


@member_view
@require_GET
def job_history(request, pk):
    job = get_job(request, pk)
    response = render(request, "web/jobs/_history.html", {"job": job, **_history_context(request, job)})
    if is_htmx(request):  # the job page's address shows the search and filters: reloadable, shareable
        query = request.GET.urlencode()
        response["HX-Replace-Url"] = reverse("web:job_detail", args=[job.pk]) + (f"?{query}" if query else "") + "#history"
    return response


@member_view
@require_GET
def job_stats(request, pk):
    job = get_job(request, pk)
    context = {"job": job, "ranges": list(stats.RANGES),
               **_stats_context(job, request.GET.get("range", "24h"), timezone.now())}
    return render(request, "web/jobs/_stats.html", context)


@member_view
@require_GET
def execution_detail(request, pk):
    from apps.executions.history.serializers import ExecutionDetailSerializer

    executions = Execution.objects.for_organization(request.actor.organization)
    executions = request.actor.scope_to_projects(executions, "job__project").select_related("job")
    execution = get_object_or_404(executions.prefetch_related("attempts"), pk=pk)
    data = ExecutionDetailSerializer(execution).data  # the API's view: secrets masked
    for attempt in data["attempts"]:
        attempt["script"] = script_run(attempt, execution.job)
    late = data["lateness_seconds"]
    sent = [attempt["request"] for attempt in data["attempts"] if attempt.get("request", {}).get("url")]
    context = {"execution": execution, "data": data, "job": execution.job,
               "lateness_ms": None if late is None else max(0, int(late * 1000)),
               "can_edit": request.actor.has_role(Role.DEVELOPER),
               "curl": curl_command(**sent[-1]) if sent else None}
    template = "web/executions/_detail.html" if is_htmx(request) else "web/executions/detail.html"
    return render(request, template, context)


# --- actions


def _job_action(request, pk):
    job = get_job(request, pk)
    require_role(request, Role.DEVELOPER)
    return job


@member_view
@require_POST
def job_pause(request, pk):
    job = _job_action(request, pk)
    pause_job(job, reason=f"paused by {request.user.email}", audit=partial(audit, request))
    messages.success(request, f"“{job.name}” is paused: it will not run until you resume it.")
    return redirect("web:job_detail", pk=job.pk)


@member_view
@require_POST
def job_resume(request, pk):
    job = _job_action(request, pk)
    try:
        resume_job(job, audit=partial(audit, request))
    except PlanLimit as exc:
        messages.error(request, f"“{job.name}” stays paused: {exc.message}")
        return redirect("web:job_detail", pk=job.pk)
    messages.success(request, f"“{job.name}” resumed; runs missed while paused are not caught up.")
    return redirect("web:job_detail", pk=job.pk)


@member_view
@require_POST
def job_trigger(request, pk):
    job = _job_action(request, pk)
    trigger_now(job, audit=partial(audit, request))
    messages.success(request, "Run started: it appears in the history below.")
    return redirect(reverse("web:job_detail", args=[job.pk]) + "#history")


@member_view
@require_POST
def job_duplicate(request, pk):
    """A paused copy made through the serializer (same validation as a create)."""
    job = _job_action(request, pk)
    data = dict(JobSerializer(job, context=serializer_context(request)).data)
    for name in JobSerializer.Meta.read_only_fields + ["id", "description_human"]:
        data.pop(name, None)
    data["name"] = f"{job.name} (copy)"[:200]
    data["enabled"] = False
    if job.kind == Job.Kind.SCRIPT:
        data["script"] = {**data["script"], "env": job.script_env or {}}  # the values, not the masks
        if not job.url:  # a script job needs no request (and an empty URL is refused)
            data.pop("request")
    if "request" in data:
        data["request"] = {**data["request"], "auth": job.auth, "headers": job.request_headers()}
    if not settings.REGIONS:
        data.pop("region", None)
    serializer = JobSerializer(data=data, context=serializer_context(request))
    errors = _validate(serializer)
    copy_job = None
    if not errors:
        try:
            copy_job = create_job(serializer.validated_data, actor=request.actor, source=JobVersion.Source.PAGE,
                                  audit=partial(audit, request), duplicate_of=str(job.pk))
        except PlanLimit as exc:
            errors = _plan_errors(plan_limit_error(exc))
    if errors:
        for messages_ in errors.values():
            for message in messages_:
                messages.error(request, f"Could not duplicate: {message}")
        return redirect("web:job_detail", pk=job.pk)
    messages.success(request, "Copy created, paused: review it, then resume it.")
    return redirect("web:job_edit", pk=copy_job.pk)


@member_view
def job_delete(request, pk):
    job = _job_action(request, pk)
    if request.method == "POST":
        name = job.name
        delete_job(job, audit=partial(audit, request))  # its history goes after, in batches
        messages.success(request, f"Job “{name}” deleted.")
        return redirect("web:dashboard")
    return render(request, "web/jobs/delete.html", {"job": job})
