"""The job's API shape (also used by the web pages).

The job is flat in the database and nested in the API: ``schedule``, ``request``,
``retry`` and ``success`` are views onto model fields (``source="*"``). Validation that
needs the whole job lives in apps.jobs.validation; here it is only wired in and its
refusals turned into API errors. The schedule, request, links and crontab import have
their own modules (schedule_serializers, request_serializers, links, crontab_import).
"""

import copy
from contextlib import contextmanager

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from apps.sql.clock import database_now
from apps.sql import rows
from apps.api.base import StrictModelSerializer, StrictSerializer
from apps.api.errors import PlanLimitExceeded
from apps.projects.models import Project
from cronsvc.delivery.masking import MASK, SECRET_HEADER_NAMES
from cronsvc.ids import uuid_or_none
from cronsvc.schedules import describe

from . import queries, validation
from .models import Job, JobDependency
from .links import job_links
from .request_serializers import SECRET_KEYS, JobRetrySerializer, JobSuccessSerializer, RequestSpecSerializer
from .schedule_serializers import NO_SCHEDULE_DESCRIPTION, BlackoutsField, ScheduleField, WindowsField
from .scheduling import job_schedule
from .scripts import ScriptSpecSerializer, validate_kind
from .services import changed_fields, check_links, stored_links

def plan_limit_error(exc):
    return PlanLimitExceeded(exc.message, limit=exc.limit, plan=exc.plan, field=exc.field, reason=exc.reason)


def invalid_error(exc):
    """JobInvalid as the API's 400, each problem under its field."""
    return serializers.ValidationError({p.field: [ErrorDetail(p.message, code=p.code)] for p in exc.problems})


@contextmanager
def refusals_as_errors():
    """The validation's refusals as the API's answers: JobInvalid a 400, PlanLimit a 402."""
    try:
        yield
    except validation.JobInvalid as exc:
        raise invalid_error(exc) from None
    except validation.PlanLimit as exc:
        raise plan_limit_error(exc) from None


# --- the job --------------------------------------------------------------------------


class ProjectField(serializers.PrimaryKeyRelatedField):
    """A project the caller reaches; any other id reads as "does not exist"."""

    def get_queryset(self):
        actor = self.context.get("actor")
        return actor.projects() if actor is not None else Project.objects.none()

    def to_internal_value(self, data):
        # Every create looks its project up: by hand-written SQL (apps.sql.rows), whose
        # query is built once, not by the ORM's query building on every create (bench/README.md,
        # "Figures behind the code"). Anything but a UUID takes DRF's way, for its errors.
        actor = self.context.get("actor")
        pk = uuid_or_none(data)
        if actor is None or pk is None:
            return super().to_internal_value(data)
        if actor.project_ids is None or pk in actor.project_ids:
            found = rows.fetch_one(queries.PROJECT_OF_ORGANIZATION,
                                   [rows.db_value(Project, "id", pk),
                                    rows.db_value(Project, "organization", actor.organization.pk)],
                                   Project)
            if found is not None:
                return found[0]
        self.fail("does_not_exist", pk_value=data)


CHOICES_SHOWN = 20  # projects a project_required error names; the rest are counted


class DefaultProject:
    """``project`` left out: the job's own project when replacing it; when creating, the one
    project the caller reaches (the organization's only one, or the one its key is limited
    to), so a first call needs no id looked up. With several (or none) it is refused with
    ``project_required`` naming the choices (``choices``, beside the error's message)."""

    requires_context = True

    def __call__(self, field):
        serializer = field.parent
        if serializer.instance is not None:
            return serializer.instance.project
        actor = field.context.get("actor")
        found = reachable_projects(actor, limit=CHOICES_SHOWN + 1) if actor is not None else []
        if len(found) == 1:
            return found[0]
        choices = [{"id": str(project.pk), "name": project.name} for project in found[:CHOICES_SHOWN]]
        serializer.error_extra = {"choices": choices}
        raise serializers.ValidationError(_project_required_message(choices, more=len(found) > CHOICES_SHOWN),
                                          code="project_required")


def _project_required_message(choices, *, more):
    if not choices:
        return "Give a project: you reach none yet; create one first (POST /api/v1/projects/)."
    named = ", ".join(f"{choice['name']} ({choice['id']})" for choice in choices)
    rest = ", and more (GET /api/v1/projects/ lists them all)" if more else ""
    return f"Give a project: you reach several, so say which one: {named}{rest}."


def reachable_projects(actor, *, limit):
    """Up to ``limit`` projects the actor reaches, by name. Hand-written SQL like the
    create's project read (the README's first call takes this way)."""
    params = [rows.db_value(Project, "organization", actor.organization.pk)]
    project_count = None
    if actor.project_ids is not None:
        if not actor.project_ids:
            return []
        params += [rows.db_value(Project, "id", pk) for pk in sorted(actor.project_ids)]
        project_count = len(actor.project_ids)
    sql = queries.projects_sql(project_count=project_count, limit=limit)
    return [found[0] for found in rows.fetch_all(sql, params, Project)]


class ErrorExtraMixin:
    # A field may leave keys for the error envelope beside code/message/fields in
    # ``error_extra`` (DefaultProject's ``choices``); is_valid's ValidationError carries them.

    error_extra = None

    def is_valid(self, *, raise_exception=False):
        try:
            return super().is_valid(raise_exception=raise_exception)
        except serializers.ValidationError as exc:
            exc.extra = self.error_extra or {}
            raise


class DependencySerializer(StrictSerializer):
    job = serializers.UUIDField(help_text="An upstream job of the same project.")
    on = serializers.ChoiceField(choices=JobDependency.On.choices, default=JobDependency.On.SUCCESS,
                                 help_text="Run after the upstream job succeeds, fails, or finishes (any).")


class DependenciesField(serializers.ListField):
    """The job's upstream links <-> [{"job": id, "on": ...}] (stored as JobDependency rows)."""

    def __init__(self, **kwargs):
        super().__init__(child=DependencySerializer(), max_length=50, source="*", **kwargs)

    def to_representation(self, job):
        return [{"job": str(link.upstream_id), "on": link.on} for link in job_links(job, "upstream_links")]

    def to_internal_value(self, data):
        return {"dependencies": super().to_internal_value(data)}


class DependentSerializer(serializers.Serializer):
    job = serializers.UUIDField()
    name = serializers.CharField()
    on = serializers.CharField()


class JobSerializer(ErrorExtraMixin, StrictModelSerializer):
    project = ProjectField(queryset=Project.objects.none(), default=DefaultProject(), help_text=(
        "Optional when you reach one project (the organization's only one, or the one your key is limited "
        "to): it is used. With several, leaving it out answers 400 `project_required` listing them in "
        "`choices`. A replace (PUT) without it keeps the job's project."))
    tags = serializers.ListField(child=serializers.CharField(max_length=64), max_length=50, required=False)
    schedule = ScheduleField(source="*")
    request = RequestSpecSerializer(source="*", required=False, help_text="What an http job sends (required for one).")
    script = ScriptSpecSerializer(source="*", required=False, allow_null=True, help_text=(
        "What a script job runs in the sandbox (required for one; docs/script-jobs.md)."))
    retry = JobRetrySerializer(source="*", required=False)
    success = JobSuccessSerializer(source="*", required=False)
    region = serializers.CharField(max_length=40, allow_blank=True, required=False,
                                   help_text="One of the operator's regions, or empty for any.")
    description_human = serializers.SerializerMethodField()
    dependencies = DependenciesField(
        required=False, help_text="Upstream jobs this job runs after (workflows), at most 50; omit to keep, "
                                  "[] to remove all. Refused with `dependency_cycle` when they close a cycle.")
    dependents = serializers.SerializerMethodField(
        help_text="Jobs that run after this one: pausing or deleting this job stops them too.")
    windows = WindowsField(required=False, help_text=(
        "Execution windows in the job's timezone, at most 14, not overlapping; [] (default): any time. An "
        "occurrence outside every window is skipped or deferred (`outside_window`). docs/run-control.md"))
    blackouts = BlackoutsField(required=False, help_text=(
        "Local dates (job's timezone) on which no run starts, at most 50; outside_window applies to them too."))
    next_run_at = serializers.DateTimeField(read_only=True, allow_null=True, help_text=(
        "When the job next comes due (UTC); null while it is paused or has no run left."))

    class Meta:
        model = Job
        fields = [
            "id", "project", "name", "description", "tags", "enabled", "schedule", "start_at", "end_at",
            "jitter_seconds", "request", "retry", "success", "misfire_policy", "misfire_grace_seconds",
            "overlap_policy", "region", "next_run_at", "last_run_at", "last_status", "consecutive_failures",
            "paused_reason", "disabled_reason", "expired_at", "description_human", "created_at", "updated_at",
            "dependencies", "dependency_mode", "dependents",
            "windows", "blackouts", "outside_window", "priority", "kind", "script", "rate_limit_per_minute",
        ]
        read_only_fields = [
            "id", "last_run_at", "last_status", "consecutive_failures", "paused_reason",
            "disabled_reason", "expired_at", "created_at", "updated_at",
        ]
        extra_kwargs = {
            "jitter_seconds": {"max_value": 86400, "help_text": "Each run is due up to this much later "
                                                                 "(a stable offset per job)."},
            "misfire_grace_seconds": {"max_value": 7 * 86400},
            "rate_limit_per_minute": {"min_value": 1, "max_value": 10_000, "help_text": (
                "At most this many of the job's requests start per minute (a token bucket; runs over it wait and "
                "go out as tokens come); null (default): no limit of its own."
            )},
            "outside_window": {"help_text": "skip (default): an occurrence outside the windows is recorded as a "
                                            "skipped run, reason `outside_window`; defer: it runs at the windows' "
                                            "next opening instead (later occurrences up to it fold into that run)."},
            "priority": {"help_text": "high runs are taken before normal and low ones of the same plan; low runs "
                                      "are held back while the plan's queue is overloaded (docs/run-control.md)."},
        }

    def get_description_human(self, job) -> str:
        if job.schedule_type == Job.ScheduleType.NONE:
            return NO_SCHEDULE_DESCRIPTION
        return describe(job_schedule(job))

    @extend_schema_field(DependentSerializer(many=True))
    def get_dependents(self, job):
        return [{"job": link.downstream_id, "name": link.downstream_name, "on": link.on}
                for link in job_links(job, "downstream_links")]

    # -- validation

    @property
    def now(self):
        # the database's clock places the first run (docs/architecture.md, "One clock")
        return self.context.get("now") or database_now()

    def to_internal_value(self, data):
        """An http job's ``request`` is required, and reported beside the other missing
        fields (a script job has none, so the field itself cannot be required)."""
        missing = self._request_missing(data)
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if missing and isinstance(exc.detail, dict):
                exc.detail.setdefault("request", [missing])
            raise
        if missing:
            raise serializers.ValidationError({"request": [missing]})
        return value

    def _request_missing(self, data):
        if self.partial or not isinstance(data, dict) or "request" in data:
            return None
        kind = data.get("kind") or (self.instance.kind if self.instance else Job.Kind.HTTP)
        if kind == Job.Kind.SCRIPT:
            return None
        return ErrorDetail(serializers.Field.default_error_messages["required"], code="required")

    def validate(self, attrs):
        project = attrs.get("project") or self.instance.project
        if attrs.get("timezone", "") is None:
            attrs["timezone"] = project.timezone
        if "auth" in attrs:
            attrs["auth"] = self._keep_masked_secrets(attrs["auth"])
        self._split_secret_headers(attrs)
        validate_kind(attrs, self.instance)
        links = self._resolve_dependencies(attrs.pop("dependencies", None))
        job = self._candidate(attrs)
        changed = changed_fields(self.instance, attrs) if self.instance else validation.ALL_FIELDS
        with refusals_as_errors():
            check_links(job, stored_links(self.instance) if links is None and self.instance else links or [],
                        lock=False)
            validation.validate_job(job, plan=self.context["actor"].organization.plan, now=self.now, changed=changed)
        if links is not None:
            attrs["dependencies"] = links  # [(upstream job, on)] for apps.jobs.services
        return attrs

    def _resolve_dependencies(self, given):
        """[(upstream Job, on)] for the given list, or None to keep the stored links."""
        if given is None:
            return None
        ids = [item["job"] for item in given]
        # scoped like every read: a key limited to some projects learns nothing (not even
        # a name) of a job outside them
        actor = self.context["actor"]
        jobs = {job.pk: job for job in actor.scope_to_projects(Job.objects.for_organization(actor.organization))
                .filter(pk__in=ids)}
        errors = {}
        for index, job_id in enumerate(ids):
            if job_id not in jobs:
                errors[f"dependencies.{index}.job"] = [ErrorDetail(
                    f"dependencies.{index}.job: no job {job_id} that you can reach.", code="does_not_exist")]
            elif ids.index(job_id) != index:
                errors[f"dependencies.{index}.job"] = [ErrorDetail(
                    f"dependencies.{index}.job: {jobs[job_id].name} is listed twice.", code="duplicate_dependency")]
        if errors:
            raise serializers.ValidationError(errors)
        # a PATCH leaves the nested default unapplied
        return [(jobs[item["job"]], item.get("on", JobDependency.On.SUCCESS)) for item in given]

    def _keep_masked_secrets(self, auth):
        """``••••`` stands for the stored secret of the same auth type."""
        if auth is None:
            return None
        stored = (self.instance.auth if self.instance else None) or {}
        for key in SECRET_KEYS[auth["type"]]:
            if auth.get(key) == MASK:
                if stored.get("type") != auth["type"] or key not in stored:
                    raise serializers.ValidationError({f"request.auth.{key}": [ErrorDetail(
                        f"Give the {key}; '{MASK}' only stands for a stored one.", code="invalid_auth")]})
                auth[key] = stored[key]
        return auth

    def _split_secret_headers(self, attrs):
        """Credential headers (and those marked secret) go to the encrypted ``secret_headers``;
        ``••••`` stands for the stored value of the same header."""
        marks = attrs.pop("_secret_marks", None)
        stored = (self.instance.secret_headers if self.instance else None) or {}
        if "headers" not in attrs:
            if marks is None:
                return
            attrs["headers"] = self.instance.request_headers() if self.instance else {}
        marked = SECRET_HEADER_NAMES | {name.lower() for name in (stored if marks is None else marks)}
        stored_by_name = {name.lower(): value for name, value in stored.items()}
        plain, secret = {}, {}
        for name, value in attrs["headers"].items():
            kept = value == MASK
            if kept:
                if name.lower() not in stored_by_name:
                    raise serializers.ValidationError({f"request.headers.{name}": [ErrorDetail(
                        f"Give the value; '{MASK}' only stands for a stored secret header.",
                        code="invalid_header")]})
                value = stored_by_name[name.lower()]
            (secret if kept or name.lower() in marked else plain)[name] = value
        attrs["headers"], attrs["secret_headers"] = plain, secret or None

    def _candidate(self, attrs):
        job = copy.copy(self.instance) if self.instance else Job()
        for name, value in attrs.items():
            setattr(job, name, value)
        job.headers = job.request_headers()  # validated together, stored apart
        job.organization_id = job.project.organization_id
        return job
