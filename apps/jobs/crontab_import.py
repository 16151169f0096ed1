"""Importing a crontab through the API and the pages: each line a job made through
JobSerializer (the same validation as a create), within the plan's job quota."""

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from apps.accounts.models import Organization
from apps.accounts.audit import audited, no_audit
from apps.api.base import StrictSerializer
from apps.api.errors import PlanLimitExceeded, error_body
from apps.projects.models import Project
from cronsvc.schedules import ScheduleError, describe, parse_crontab, parse_schedule

from .queries import job_count
from .models import JobVersion
from .scheduling import job_schedule
from .serializers import DefaultProject, ErrorExtraMixin, JobSerializer, ProjectField, refusals_as_errors
from .services import create_job


class ImportCrontabSerializer(ErrorExtraMixin, StrictSerializer):
    crontab = serializers.CharField(trim_whitespace=False, help_text="At most 1000 lines and 64 KiB.")
    project = ProjectField(queryset=Project.objects.none(), default=DefaultProject(), help_text=(
        "Optional when you reach one project: it is used; with several, 400 `project_required` "
        "listing them in `choices`."))
    dry_run = serializers.BooleanField(default=True, help_text="true (default): only report what would be created.")


class ImportedJobSerializer(serializers.Serializer):
    line = serializers.IntegerField()
    id = serializers.UUIDField(allow_null=True, help_text="The created job; null on a dry run.")
    name = serializers.CharField()
    schedule = serializers.JSONField()
    request = serializers.JSONField()
    description_human = serializers.CharField()


class CrontabLineErrorSerializer(serializers.Serializer):
    line = serializers.IntegerField()
    text = serializers.CharField(allow_blank=True)
    code = serializers.CharField(help_text="not_http, unparseable_command, invalid_url (curl -G data that makes "
                                           "no URL), conflicting_options (curl -G with --json), invalid_cron, "
                                           "unknown_timezone, a job validation code, or plan_limit.")
    reason = serializers.CharField()


class ImportResultSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    jobs = ImportedJobSerializer(many=True)
    errors = CrontabLineErrorSerializer(many=True)


def import_crontab(*, crontab, project, dry_run, context, audit=no_audit):
    """Validate every job line of a crontab like a POST /jobs/ would, and create the
    valid ones unless ``dry_run``. Returns ImportResultSerializer data."""
    try:
        parsed = parse_crontab(crontab, default_timezone=project.timezone)
    except ScheduleError as exc:
        raise serializers.ValidationError({"crontab": [ErrorDetail(exc.message, code=exc.code)]}) from None
    lines = crontab.splitlines()
    errors = [{"line": e.line, "text": e.text, "code": e.code, "reason": e.reason} for e in parsed.errors]
    accepted = []
    for imported in parsed.jobs:
        body = {"project": project.pk, "name": imported.name or f"crontab line {imported.line}",
                "schedule": imported.schedule, "request": imported.request}
        code, reason = _validate_line(JobSerializer(data=body, context=context))
        if code is None:
            accepted.append((imported, body))
        else:
            errors.append({"line": imported.line, "text": lines[imported.line - 1], "code": code, "reason": reason})
    jobs, refused = _create_all(accepted, project, lines, dry_run=dry_run, context=context, audit=audit)
    return {"dry_run": dry_run, "jobs": jobs, "errors": sorted(errors + refused, key=lambda e: e["line"])}


@audited
def _create_all(accepted, project, lines, *, dry_run, context, audit):
    """The accepted lines the plan leaves room for, created (unless ``dry_run``) with one audit
    event naming them; the others refused."""
    accepted, refused = _within_quota(accepted, context["actor"], lines)
    jobs = [_imported(imported, body, None if dry_run else _create(body, context)) for imported, body in accepted]
    created = [str(job["id"]) for job in jobs if job["id"]]
    if created:
        audit("job.import_crontab", project, {"created": created})
    return jobs, refused


def _validate_line(serializer):
    """(None, None) when valid, else (code, reason) of the first problem."""
    try:
        if serializer.is_valid():
            return None, None
        error = error_body(serializers.ValidationError(serializer.errors))
    except PlanLimitExceeded as exc:
        error = error_body(exc)
    return error["code"], error["message"]


def _within_quota(accepted, actor, lines):
    """Split the lines the plan's max_jobs leaves room for from the rest (locks the organization)."""
    organization = Organization.objects.select_for_update().get(pk=actor.organization.pk)
    plan = actor.organization.plan
    room = max(0, plan.max_jobs - job_count(organization.pk))
    refused = [{"line": imported.line, "text": lines[imported.line - 1], "code": "plan_limit",
                "reason": f"Your plan ({plan.name}) allows {plan.max_jobs} jobs; this one would exceed it."}
               for imported, _ in accepted[room:]]
    return accepted[:room], refused


def _create(body, context):
    serializer = JobSerializer(data=body, context=context)
    serializer.is_valid(raise_exception=True)
    with refusals_as_errors():
        return create_job(serializer.validated_data, actor=context["actor"], source=JobVersion.Source.IMPORT)


def _imported(imported, body, job):
    schedule = job_schedule(job) if job else parse_schedule(imported.schedule)
    return {"line": imported.line, "id": job.pk if job else None, "name": body["name"],
            "schedule": imported.schedule, "request": imported.request, "description_human": describe(schedule)}
