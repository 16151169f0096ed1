"""The job's API shape (also used by the web pages) and the schedule preview/import inputs.

The job is flat in the database and nested in the API: ``schedule``, ``request``,
``retry`` and ``success`` are views onto model fields (``source="*"``). Validation that
needs the whole job lives in apps.jobs.validation; here it is only wired in and its
refusals turned into API errors.
"""

import copy
from collections.abc import Mapping
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone
from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from apps.sql import rows
from apps.api.base import StrictModelSerializer, StrictSerializer
from apps.api.errors import PlanLimitExceeded, error_body
from apps.accounts.models import Organization
from apps.projects.models import Project
from cronsvc.delivery.masking import MASK, SECRET_HEADER_NAMES
from cronsvc.ids import uuid_or_none
from cronsvc.schedules import ScheduleError, describe, parse_crontab, parse_schedule, schedule_to_dict
from cronsvc.schedules.window_parse import blackouts_to_list, parse_blackouts, parse_windows, windows_to_list

from . import jobcount, validation, versions
from .models import Job, JobDependency, JobVersion
from .scheduling import job_schedule
from .scripts import ScriptSpecSerializer, validate_kind
from .services import pause_job, reschedule, resume_job

SECRET_KEYS = {"basic": ("username", "password"), "bearer": ("token",)}
MAX_RUNS = 100


def schedule_error(exc):
    """A ScheduleError as a DRF error keyed by its path below ``schedule``."""
    detail = ErrorDetail(exc.message, code=exc.code)
    sub = exc.field.removeprefix("schedule").lstrip(".")
    return serializers.ValidationError({sub: [detail]} if sub else [detail])


def plan_limit_error(exc):
    return PlanLimitExceeded(exc.message, limit=exc.limit, plan=exc.plan, field=exc.field, reason=exc.reason)


# --- schedule -------------------------------------------------------------------------


class CronScheduleSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["cron"])
    expression = serializers.CharField(help_text="5 fields or an @macro, e.g. `0 3 * * 1-5`.")
    timezone = serializers.CharField(required=False, help_text="IANA name; default: the project's timezone.")


class IntervalScheduleSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["interval"])
    seconds = serializers.IntegerField(min_value=1, max_value=366 * 86400)
    timezone = serializers.CharField(required=False, help_text="For display only.")
    anchor = serializers.DateTimeField(
        required=False, write_only=True,
        help_text="Schedule preview only: runs fall on anchor + k·seconds. A job's runs count from its "
                  "start_at (or its creation); sending anchor for a job is an error.")


class OnceScheduleSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["once"])
    at = serializers.DateTimeField(help_text="An instant with an offset or Z.")
    timezone = serializers.CharField(required=False, help_text="For display only.")


class NoneScheduleSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["none"], help_text="No schedule: the job runs only when its "
                                                                "upstream jobs (dependencies) trigger it.")
    timezone = serializers.CharField(required=False, help_text="For display only.")


NO_SCHEDULE_DESCRIPTION = "Runs when its upstream jobs trigger it"

SCHEDULE_SCHEMA = PolymorphicProxySerializer(
    component_name="Schedule",
    serializers={"cron": CronScheduleSerializer, "interval": IntervalScheduleSerializer,
                 "once": OnceScheduleSerializer, "none": NoneScheduleSerializer},
    resource_type_field_name="type",
)


@extend_schema_field(SCHEDULE_SCHEMA)
class ScheduleField(serializers.Field):
    """The job's schedule <-> schedule_type, cron_expression, interval_seconds, run_at, timezone.

    Without a timezone, ``timezone`` comes back None: the serializer fills in the
    project's timezone once it knows the project.
    """

    allow_anchor = False

    def to_representation(self, job):
        if job.schedule_type == Job.ScheduleType.NONE:
            return {"type": "none", "timezone": job.timezone}
        data = schedule_to_dict(job_schedule(job))
        data.pop("anchor", None)  # a job's interval counts from start_at or creation
        return data

    def to_internal_value(self, data):
        if isinstance(data, Mapping) and "anchor" in data and not self.allow_anchor:
            raise serializers.ValidationError({"anchor": [ErrorDetail(
                "schedule.anchor: a job's interval counts from its start_at (or its creation); set start_at instead.",
                code="invalid_schedule")]})
        if isinstance(data, Mapping) and data.get("type") == "none" and not self.allow_anchor:
            return no_schedule_fields(data)
        try:
            schedule = parse_schedule(data)
        except ScheduleError as exc:
            raise schedule_error(exc) from None
        return to_model_fields(schedule, timezone_given=data.get("timezone") is not None)


def no_schedule_fields(data):
    unknown = sorted(set(data) - {"type", "timezone"})
    if unknown:
        raise serializers.ValidationError({key: [ErrorDetail("Unknown field.", code="unknown_field")]
                                           for key in unknown})
    zone = data.get("timezone")
    if zone is not None:  # the same check as the other schedules' timezones
        try:
            parse_schedule({"type": "interval", "seconds": 3600, "timezone": zone})
        except ScheduleError as exc:
            raise schedule_error(exc) from None
    return {"schedule_type": "none", "cron_expression": "", "interval_seconds": None, "run_at": None,
            "timezone": zone}


def to_model_fields(schedule, *, timezone_given=True):
    data = schedule_to_dict(schedule)
    kind = data["type"]
    return {
        "schedule_type": kind,
        "cron_expression": data.get("expression", ""),
        "interval_seconds": data.get("seconds"),
        "run_at": schedule.at if kind == "once" else None,
        "timezone": data["timezone"] if timezone_given else None,
    }


# --- execution windows ----------------------------------------------------------------


class WindowSerializer(serializers.Serializer):
    days = serializers.ListField(child=serializers.ChoiceField(choices=["mon", "tue", "wed", "thu", "fri", "sat",
                                                                        "sun"]))
    start = serializers.CharField(help_text="Local time HH:MM in the job's timezone.")
    end = serializers.CharField(help_text="Local time HH:MM; after start, or at/before it with overnight.")
    overnight = serializers.BooleanField(required=False, help_text="The window closes at `end` the next day.")


class BlackoutSerializer(serializers.Serializer):
    start = serializers.DateField(help_text="First local date (job's timezone) on which nothing runs.")
    end = serializers.DateField(required=False, help_text="Last such date, included; default: start.")


class _WindowListField(serializers.Field):
    """A list parsed and normalised by the engine (cronsvc.schedules.window_parse); its
    refusals keep their stable code, keyed by the path below the field."""

    parse = to_list = None

    def to_representation(self, value):
        return value or []

    def to_internal_value(self, data):
        try:
            return type(self).to_list(type(self).parse(data, self.field_name))
        except ScheduleError as exc:
            sub = exc.field.removeprefix(self.field_name).lstrip(".")
            detail = ErrorDetail(exc.message, code=exc.code)
            raise serializers.ValidationError({sub: [detail]} if sub else [detail]) from None


@extend_schema_field(WindowSerializer(many=True))
class WindowsField(_WindowListField):
    parse, to_list = staticmethod(parse_windows), staticmethod(windows_to_list)


@extend_schema_field(BlackoutSerializer(many=True))
class BlackoutsField(_WindowListField):
    parse, to_list = staticmethod(parse_blackouts), staticmethod(blackouts_to_list)


# --- request --------------------------------------------------------------------------


class BasicAuthSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["basic"])
    username = serializers.CharField()
    password = serializers.CharField(help_text=f"Write-only: responses show `{MASK}`.")


class BearerAuthSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["bearer"])
    token = serializers.CharField(help_text=f"Write-only: responses show `{MASK}`.")


@extend_schema_field(PolymorphicProxySerializer(
    component_name="RequestAuth", serializers={"basic": BasicAuthSerializer, "bearer": BearerAuthSerializer},
    resource_type_field_name="type"))
class AuthField(serializers.Field):
    """Credentials, never shown back: secrets read as ``••••``. Sending ``••••`` again
    (a read-modify-write round trip) keeps the stored secret; null removes the auth."""

    def to_representation(self, auth):
        if not auth:
            return None
        masked = {key: value for key, value in auth.items() if key in ("type", "username")}
        masked.update({key: MASK for key in SECRET_KEYS.get(auth.get("type"), ()) if key != "username"})
        return masked

    def to_internal_value(self, data):
        if not isinstance(data, Mapping) or data.get("type") not in SECRET_KEYS:
            raise serializers.ValidationError({"type": [ErrorDetail(
                'Give {"type": "basic", "username", "password"} or {"type": "bearer", "token"}.',
                code="invalid_auth")]})
        allowed = {"type", *SECRET_KEYS[data["type"]]}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise serializers.ValidationError({k: [ErrorDetail("Unknown field.", code="unknown_field")]
                                               for k in unknown})
        return {key: data.get(key) for key in sorted(allowed)}


class HeadersField(serializers.DictField):
    """All the request's headers; secret ones (stored encrypted) read ``••••``. Sending
    ``••••`` back keeps the stored value."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=8192),
                         source="*", **kwargs)

    def to_representation(self, job):
        return {**(job.headers or {}), **{name: MASK for name in (job.secret_headers or {})}}

    def to_internal_value(self, data):
        return {"headers": super().to_internal_value(data)}


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class SecretHeaderNamesField(serializers.Field):
    """Names of headers stored encrypted and masked, beyond the always-secret Authorization,
    Proxy-Authorization, Cookie, X-API-Key and Api-Key. Omit to keep the current marks."""

    def __init__(self, **kwargs):
        super().__init__(source="*", **kwargs)

    def to_representation(self, job):
        return sorted(job.secret_headers or {})

    def to_internal_value(self, data):
        if not isinstance(data, list) or not all(isinstance(n, str) and 0 < len(n) <= 256 for n in data):
            raise serializers.ValidationError("Give a list of header names.", code="invalid_header")
        return {"_secret_marks": data}


class RequestSpecSerializer(StrictSerializer):
    url = serializers.CharField(max_length=2048, help_text="http(s) URL; private addresses are refused.")
    method = serializers.ChoiceField(choices=Job.Method.choices, required=False, help_text="Default GET.")
    headers = HeadersField(
        required=False, help_text="Custom headers; cronsvc's own (X-Cronsvc-*, webhook-*) are reserved. "
                                  f"Secret ones read `{MASK}`; sending `{MASK}` back keeps the stored value.")
    secret_headers = SecretHeaderNamesField(required=False)
    body = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=65536, required=False,
                                 help_text="May use {{ job.id }}, {{ execution.id }}, {{ scheduled_for }}, ...")
    body_format = serializers.ChoiceField(choices=Job.BodyFormat.choices, required=False, help_text="Default raw.")
    timeout_seconds = serializers.IntegerField(min_value=1, max_value=300, required=False,
                                               help_text="Default 30; at most the plan's max_timeout_seconds.")
    follow_redirects = serializers.BooleanField(required=False, help_text="Default false.")
    auth = AuthField(required=False, allow_null=True,
                     help_text=f"Basic or bearer credentials; secrets are write-only (shown as `{MASK}`); "
                               "omit to keep, null to remove.")


class JobRetrySerializer(StrictSerializer):
    max_attempts = serializers.IntegerField(min_value=1, max_value=100, required=False,
                                            help_text="Including the first; at most the plan's max_attempts.")
    initial_delay_seconds = serializers.IntegerField(source="retry_initial_delay_seconds", min_value=1,
                                                     max_value=86400, required=False)
    max_delay_seconds = serializers.IntegerField(source="retry_max_delay_seconds", min_value=1,
                                                 max_value=7 * 86400, required=False)
    multiplier = serializers.FloatField(source="retry_multiplier", min_value=1.0, max_value=10.0, required=False)
    retry_on_timeout = serializers.BooleanField(required=False)


class JobSuccessSerializer(StrictSerializer):
    status_codes = serializers.CharField(source="success_status_codes", max_length=200, required=False,
                                         help_text='Codes and ranges, e.g. "200-299, 304". Default 200-299.')
    body_contains = serializers.CharField(source="success_body_contains", max_length=500, allow_blank=True,
                                          required=False)
    body_regex = serializers.CharField(source="success_body_regex", max_length=500, allow_blank=True,
                                       required=False)


# --- the job --------------------------------------------------------------------------


class ProjectField(serializers.PrimaryKeyRelatedField):
    """A project the caller reaches; any other id reads as "does not exist"."""

    def get_queryset(self):
        actor = self.context.get("actor")
        return actor.projects() if actor is not None else Project.objects.none()

    def to_internal_value(self, data):
        # Every create looks its project up: by hand-written SQL (apps.sql.rows), the
        # ORM's query building was a sixth of a create. Anything but a UUID takes DRF's way,
        # for its errors.
        actor = self.context.get("actor")
        pk = uuid_or_none(data)
        if actor is None or pk is None:
            return super().to_internal_value(data)
        if actor.project_ids is None or pk in actor.project_ids:
            found = rows.fetch_one(_PROJECT_SQL, [rows.db_value(Project, "id", pk),
                                                  rows.db_value(Project, "organization", actor.organization.pk)],
                                   Project)
            if found is not None:
                return found[0]
        self.fail("does_not_exist", pk_value=data)


_PROJECT_SQL = (f'SELECT {rows.select_list(Project, "p")} FROM "{Project._meta.db_table}" p '
                'WHERE p."id" = %s AND p."organization_id" = %s')

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
    where = 'p."organization_id" = %s'
    if actor.project_ids is not None:
        if not actor.project_ids:
            return []
        ids = [rows.db_value(Project, "id", pk) for pk in sorted(actor.project_ids)]
        where += f' AND p."id" IN ({", ".join(["%s"] * len(ids))})'
        params += ids
    sql = (f'SELECT {rows.select_list(Project, "p")} FROM "{Project._meta.db_table}" p '
           f'WHERE {where} ORDER BY p."name", p."id" LIMIT {int(limit)}')
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
        return [{"job": str(link.upstream_id), "on": link.on} for link in _links(job, "upstream_links")]

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

    class Meta:
        model = Job
        fields = [
            "id", "project", "name", "description", "tags", "enabled", "schedule", "start_at", "end_at",
            "jitter_seconds", "request", "retry", "success", "misfire_policy", "misfire_grace_seconds",
            "overlap_policy", "region", "next_run_at", "last_run_at", "last_status", "consecutive_failures",
            "paused_reason", "disabled_reason", "expired_at", "description_human", "created_at", "updated_at",
            "dependencies", "dependency_mode", "dependents",
            "windows", "blackouts", "outside_window", "priority", "kind", "script",
        ]
        read_only_fields = [
            "id", "next_run_at", "last_run_at", "last_status", "consecutive_failures", "paused_reason",
            "disabled_reason", "expired_at", "created_at", "updated_at",
        ]
        extra_kwargs = {
            "jitter_seconds": {"max_value": 86400, "help_text": "Each run is due up to this much later "
                                                                 "(a stable offset per job)."},
            "misfire_grace_seconds": {"max_value": 7 * 86400},
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
                for link in _links(job, "downstream_links")]

    # -- validation

    @property
    def now(self):
        return self.context.get("now") or timezone.now()

    def validate(self, attrs):
        project = attrs.get("project") or self.instance.project
        if attrs.get("timezone", "") is None:
            attrs["timezone"] = project.timezone
        if "auth" in attrs:
            attrs["auth"] = self._keep_masked_secrets(attrs["auth"])
        self._split_secret_headers(attrs)
        validate_kind(attrs, self.instance)
        self._links = self._resolve_dependencies(attrs.pop("dependencies", None))
        job = self._candidate(attrs)
        self._check_dependencies(job, lock=False)
        try:
            validation.validate_job(job, plan=self.context["actor"].organization.plan, now=self.now,
                                    changed=self._changed(attrs))
        except validation.JobInvalid as exc:
            raise serializers.ValidationError(
                {p.field: [ErrorDetail(p.message, code=p.code)] for p in exc.problems}) from None
        except validation.PlanLimit as exc:
            raise plan_limit_error(exc) from None
        return attrs

    def _resolve_dependencies(self, given):
        """[(upstream Job, on)] for the given list, or None to keep the stored links."""
        if given is None:
            return None
        ids = [item["job"] for item in given]
        jobs = {job.pk: job for job in Job.objects.for_organization(self.context["actor"].organization)
                .filter(pk__in=ids)}
        errors = {}
        for index, job_id in enumerate(ids):
            if job_id not in jobs:
                errors[f"dependencies.{index}.job"] = [ErrorDetail(
                    f"dependencies.{index}.job: no job {job_id} in your organization.", code="does_not_exist")]
            elif ids.index(job_id) != index:
                errors[f"dependencies.{index}.job"] = [ErrorDetail(
                    f"dependencies.{index}.job: {jobs[job_id].name} is listed twice.", code="duplicate_dependency")]
        if errors:
            raise serializers.ValidationError(errors)
        # a PATCH leaves the nested default unapplied
        return [(jobs[item["job"]], item.get("on", JobDependency.On.SUCCESS)) for item in given]

    def _check_dependencies(self, job, *, lock=True):
        """In validate (so forms show the problem), and again when saving with the project
        row locked: two concurrent saves cannot close a cycle between them."""
        links = self._links
        if links is None:
            links = [(link.upstream, link.on) for link in job.upstream_links.select_related("upstream")] \
                if self.instance else []
        if lock and links:  # a job without upstreams closes no cycle: nothing to serialise
            Project.objects.select_for_update().filter(pk=job.project_id).first()
        try:
            validation.check_dependencies(job, links)
        except validation.JobInvalid as exc:
            raise serializers.ValidationError(
                {p.field: [ErrorDetail(p.message, code=p.code)] for p in exc.problems}) from None

    def _save_dependencies(self, job):
        if self._links is None:
            return
        JobDependency.objects.filter(downstream=job).delete()
        JobDependency.objects.bulk_create(
            [JobDependency(downstream=job, upstream=upstream, on=on) for upstream, on in self._links])
        job.loaded_links = None  # the representation reads the new links

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

    def _changed(self, attrs):
        if self.instance is None:
            return validation.ALL_FIELDS
        return frozenset(name for name, value in attrs.items() if getattr(self.instance, name) != value)

    # -- saving

    def _author(self):
        actor = self.context["actor"]
        return versions.Author(user=actor.user, api_key=actor.api_key)

    def _source(self):
        """Which door the change came through, for its version (the pages and the import say)."""
        return self.context.get("version_source", JobVersion.Source.API)

    def create(self, validated_data):
        actor = self.context["actor"]
        # No savepoint of its own inside a caller's transaction (the API's, with the audit
        # event): no caller goes on in it after a failed create, and it costs two round trips.
        with transaction.atomic(savepoint=False):
            try:
                organization = _room_for_a_job(actor.organization)
            except validation.PlanLimit as exc:
                raise plan_limit_error(exc) from None
            job = Job(**validated_data, organization=organization)
            reschedule(job, now=self.now)
            _not_expired_without_schedule(job)
            self._check_dependencies(job)
            rows.insert(job)  # job.save() without the ORM's insert compiler
            self._save_dependencies(job)
            versions.record(job, None, [(upstream.pk, on) for upstream, on in self._links or ()],
                            author=self._author(), source=self._source())
        if not self._links:
            job.loaded_links = {"upstream_links": [], "downstream_links": []}  # a new job has none
        return job

    def update(self, job, validated_data):
        enabled = validated_data.pop("enabled", job.enabled)
        changed = self._changed(validated_data)
        dependencies = [(link.upstream_id, link.on) for link in _links(job, "upstream_links")]
        before = versions.definition(job, dependencies)
        if self._links is not None:
            dependencies = [(upstream.pk, on) for upstream, on in self._links]
        for name, value in validated_data.items():
            setattr(job, name, value)
        job.organization_id = job.project.organization_id
        if changed & (validation.SCHEDULE_FIELDS | {"jitter_seconds"}):
            reschedule(job, now=self.now)
            _not_expired_without_schedule(job)
        with transaction.atomic():
            self._check_dependencies(job)
            # Before the save, which then writes the version's number (see versions.record).
            versions.record(job, before, dependencies, author=self._author(), source=self._source())
            job.save()
            self._save_dependencies(job)
            if enabled and not job.enabled:
                resume_job(job, now=self.now)
            elif job.enabled and not enabled:
                pause_job(job)
        return job


def _room_for_a_job(organization):
    """``organization``, once sure one more job fits its plan (PlanLimit otherwise). Near
    the limit the organization's row is locked (and returned locked) so that concurrent
    creates cannot overshoot it; far below it the lock would only serialise them."""
    plan = organization.plan
    if validation.far_below_job_quota(organization, plan):
        return organization
    locked = Organization.objects.select_for_update().get(pk=organization.pk)
    validation.check_job_quota(locked, plan)
    return locked


@dataclass(frozen=True)
class Link:
    upstream_id: object
    downstream_id: object
    on: str
    downstream_name: str


def load_links(jobs):
    """Attach every job's upstream and downstream links, read in one hand-written query (the
    ORM's two prefetches cost several times the query itself: most of a job read). Jobs
    annotated ``has_links=False`` have none: no query for them."""
    linked = [job for job in jobs if getattr(job, "has_links", True)]
    if not linked:
        return attach_links(jobs, [])
    ids = [rows.db_value(Job, "id", job.pk) for job in linked]
    marks = ", ".join(["%s"] * len(ids))
    sql = (f'SELECT {rows.select_list(JobDependency, "d")}, j."name" '
           f'FROM "{JobDependency._meta.db_table}" d JOIN "{Job._meta.db_table}" j ON j."id" = d."downstream_id" '
           f'WHERE d."upstream_id" IN ({marks}) OR d."downstream_id" IN ({marks}) ORDER BY d."id"')
    return attach_links(jobs, rows.fetch_all(sql, ids + ids, JobDependency))


def attach_links(jobs, found):
    """Give each job its links from ``found``, pairs of (JobDependency, its downstream's
    name) in link order; a pair whose dependency has no id (an outer join's miss) is none."""
    by_id = {job.pk: job for job in jobs}
    for job in jobs:
        job.loaded_links = {"upstream_links": [], "downstream_links": []}
    for dependency, downstream_name in found:
        if dependency.pk is None:
            continue
        link = Link(dependency.upstream_id, dependency.downstream_id, dependency.on, downstream_name)
        if link.downstream_id in by_id:
            by_id[link.downstream_id].loaded_links["upstream_links"].append(link)
        if link.upstream_id in by_id:
            by_id[link.upstream_id].loaded_links["downstream_links"].append(link)
    return jobs


def _links(job, name):
    """The job's upstream or downstream links (loaded by load_links, or read now)."""
    if job.pk is None or job._state.adding:
        return []
    if getattr(job, "loaded_links", None) is None:
        load_links([job])
    return job.loaded_links[name]


def _not_expired_without_schedule(job):
    if job.schedule_type == Job.ScheduleType.NONE:
        job.expired_at = None  # no next run is normal for a job its upstreams start


# --- schedule preview, next runs, crontab import -------------------------------------


class CountField(serializers.IntegerField):
    """1..100, refused with the stable code ``invalid_count``."""

    def __init__(self, **kwargs):
        super().__init__(min_value=1, max_value=MAX_RUNS, default=5, help_text="How many runs, 1 to 100.", **kwargs)

    def to_internal_value(self, data):
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError:
            raise serializers.ValidationError("Give a whole number from 1 to 100.", code="invalid_count") from None

    def run_validators(self, value):
        try:
            super().run_validators(value)
        except serializers.ValidationError:
            raise serializers.ValidationError("Give a whole number from 1 to 100.", code="invalid_count") from None


def refuse_out_of_range(**instants):
    problems = validation.instant_problems(**instants)
    if problems:
        raise serializers.ValidationError({p.field: [ErrorDetail(p.message, code=p.code)] for p in problems})


class NextRunsQuerySerializer(serializers.Serializer):
    count = CountField()
    after = serializers.DateTimeField(required=False, help_text="Default: now.")

    def validate(self, attrs):
        refuse_out_of_range(after=attrs.get("after"))
        return attrs


class PreviewScheduleField(ScheduleField):
    allow_anchor = True

    def to_internal_value(self, data):
        try:
            return parse_schedule(data)
        except ScheduleError as exc:
            raise schedule_error(exc) from None


class SchedulePreviewSerializer(StrictSerializer):
    schedule = PreviewScheduleField(help_text="Without timezone: UTC. Interval schedules may give an anchor.")
    count = CountField()
    after = serializers.DateTimeField(required=False, help_text="Default: now.")
    start_at = serializers.DateTimeField(required=False, allow_null=True)
    end_at = serializers.DateTimeField(required=False, allow_null=True)

    def validate(self, attrs):
        schedule = attrs["schedule"]
        refuse_out_of_range(**{
            "schedule.at": getattr(schedule, "at", None), "schedule.anchor": getattr(schedule, "anchor", None),
            "after": attrs.get("after"), "start_at": attrs.get("start_at"), "end_at": attrs.get("end_at")})
        return attrs


class RunSerializer(serializers.Serializer):
    at = serializers.CharField(help_text="UTC, ISO 8601 with Z.")
    local = serializers.CharField(help_text="The same instant in the schedule's timezone, with its offset.")
    status = serializers.ChoiceField(choices=["run", "skipped", "deferred"], required=False, help_text=(
        "A job's next runs only: what its execution windows do to the occurrence (`run` when it has none)."))
    reason = serializers.CharField(required=False, help_text="`outside_window` when skipped or deferred, else empty.")
    occurrence = serializers.CharField(required=False, help_text="The schedule's own time (UTC); differs from `at` "
                                                                  "when deferred.")


class RunsSerializer(serializers.Serializer):
    runs = RunSerializer(many=True)
    description = serializers.CharField()


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
    code = serializers.CharField(help_text="not_http, unparseable_command, invalid_cron, unknown_timezone, "
                                           "a job validation code, or plan_limit.")
    reason = serializers.CharField()


class ImportResultSerializer(serializers.Serializer):
    dry_run = serializers.BooleanField()
    jobs = ImportedJobSerializer(many=True)
    errors = CrontabLineErrorSerializer(many=True)


def import_crontab(*, crontab, project, dry_run, context):
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
    with transaction.atomic():
        accepted, refused = _within_quota(accepted, context["actor"], lines)
        jobs = [_imported(imported, body, None if dry_run else _create(body, context))
                for imported, body in accepted]
    return {"dry_run": dry_run, "jobs": jobs, "errors": sorted(errors + refused, key=lambda e: e["line"])}


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
    room = max(0, plan.max_jobs - jobcount.job_count(organization.pk))
    refused = [{"line": imported.line, "text": lines[imported.line - 1], "code": "plan_limit",
                "reason": f"Your plan ({plan.name}) allows {plan.max_jobs} jobs; this one would exceed it."}
               for imported, _ in accepted[room:]]
    return accepted[:room], refused


def _create(body, context):
    serializer = JobSerializer(data=body, context={**context, "version_source": JobVersion.Source.IMPORT})
    serializer.is_valid(raise_exception=True)
    return serializer.save()


def _imported(imported, body, job):
    schedule = job_schedule(job) if job else parse_schedule(imported.schedule)
    return {"line": imported.line, "id": job.pk if job else None, "name": body["name"],
            "schedule": imported.schedule, "request": imported.request, "description_human": describe(schedule)}
