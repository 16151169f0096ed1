"""Is this job acceptable? Shared by the REST API and the web pages.

The checks work on a Job instance (saved or not) holding the proposed values, and only
on the parts that changed: editing a job's name must not fail because its one-off time
has passed since, or because the plan was lowered after the job was made.

Two kinds of refusal:
- JobInvalid (HTTP 400): the job is wrong whatever the plan, with the engine's codes
  (invalid_cron, never_fires, interval_too_short, invalid_header, forbidden_target, ...).
- PlanLimit (HTTP 402 plan_limit): the job is fine but the organization's plan does not
  allow it; ``plan`` names the cheapest plan that does.

A schedule more frequent than the plan allows is a PlanLimit (reason interval_too_short)
when some plan allows it, and a JobInvalid interval_too_short when none does (below the
platform's floor: the smallest min_interval_seconds of all plans).
"""

from dataclasses import dataclass
from datetime import datetime, timezone

from django.conf import settings
from django.db.models import Min

from apps.billing.models import Plan
from cronsvc.delivery.errors import InvalidRequest
from cronsvc.delivery.guard import AddressPolicy, ForbiddenTarget, check_url_at_save, parse_networks, parse_ports
from cronsvc.delivery.outcome import SuccessCriteria, parse_status_codes, validate_criteria
from cronsvc.delivery.request import MAX_TIMEOUT_SECONDS, RequestSpec, validate_spec
from cronsvc.schedules import ScheduleError, validate_schedule
from cronsvc.schedules.describe import format_duration

from .models import Job
from .scheduling import job_schedule

SCHEDULE_FIELDS = frozenset(
    {"schedule_type", "cron_expression", "interval_seconds", "run_at", "timezone", "start_at", "end_at"})
REQUEST_FIELDS = frozenset(
    {"url", "method", "headers", "body", "body_format", "auth", "timeout_seconds", "follow_redirects"})
SUCCESS_FIELDS = frozenset({"success_status_codes", "success_body_contains", "success_body_regex"})
RETRY_FIELDS = frozenset({"max_attempts", "retry_initial_delay_seconds", "retry_max_delay_seconds",
                          "retry_multiplier", "retry_on_timeout"})
ALL_FIELDS = SCHEDULE_FIELDS | REQUEST_FIELDS | SUCCESS_FIELDS | RETRY_FIELDS | {"region"}
CONNECT_TIMEOUT_SECONDS = 5.0

# Instants the API accepts: the schedule math works up to year 9998, and a run must be
# computable a year (plus jitter) past any instant a customer gives.
EARLIEST = datetime(1970, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(9000, 1, 1, tzinfo=timezone.utc)

# Engine field names -> the API's input paths.
_REQUEST_PATHS = {"timeout": "request.timeout_seconds", "connect_timeout": "request.timeout_seconds",
                  "max_redirects": "request.follow_redirects"}


@dataclass(frozen=True)
class Problem:
    code: str
    field: str  # dotted API path, e.g. "schedule.expression"
    message: str


class JobInvalid(Exception):
    def __init__(self, problems):
        super().__init__("; ".join(p.message for p in problems))
        self.problems = problems


class PlanLimit(Exception):
    def __init__(self, *, limit, field, message, plan=None, reason=None):
        super().__init__(message)
        self.limit, self.field, self.message, self.plan, self.reason = limit, field, message, plan, reason


def validate_job(job, *, plan, now, changed=ALL_FIELDS):
    """Raise JobInvalid or PlanLimit for ``job`` (its ``changed`` model fields)."""
    problems = []
    if changed & SCHEDULE_FIELDS:
        problems += _schedule_problems(job, now)
    if changed & REQUEST_FIELDS:
        problems += _request_problems(job, url_changed="url" in changed)
    if changed & SUCCESS_FIELDS:
        problems += _success_problems(job)
    if changed & RETRY_FIELDS:
        problems += _retry_problems(job)
    if "region" in changed and job.region and job.region not in settings.REGIONS:
        problems.append(Problem("invalid_region", "region",
                                f"region: give one of {', '.join(settings.REGIONS) or '(none configured)'}, or ''."))
    if problems:
        raise JobInvalid(problems)
    _check_plan(job, plan, now, changed)


def instant_problems(**instants):
    """Problems for the given ``path=datetime`` (None skipped) outside [EARLIEST, LATEST)."""
    return [Problem("out_of_range", path, f"{path}: give a time from 1970 to 8999 (UTC).")
            for path, value in instants.items() if value is not None and not EARLIEST <= value < LATEST]


def check_job_quota(organization, plan, adding=1):
    """PlanLimit when ``adding`` more jobs would exceed the plan's max_jobs. Call it with
    the organization row locked (select_for_update) so concurrent creates cannot overshoot."""
    count = Job.objects.for_organization(organization).count()
    if count + adding > plan.max_jobs:
        raise PlanLimit(
            limit="max_jobs", field=None, plan=_cheapest_plan(lambda p: p.max_jobs >= count + adding),
            message=f"Your plan ({plan.name}) allows {plan.max_jobs} jobs and you have {count}; "
                    "delete some or upgrade the plan.",
        )


def outbound_policy():
    """Which addresses jobs may call, from the operator's settings (read at call time). The
    same policy as the workers' (apps.executions.outbound), which validation may not import."""
    ports = getattr(settings, "OUTBOUND_ALLOWED_PORTS", "")
    return AddressPolicy(allow_private=settings.OUTBOUND_ALLOW_PRIVATE,
                         allowed_networks=parse_networks(",".join(settings.OUTBOUND_ALLOWED_NETWORKS)),
                         allowed_ports=parse_ports(ports) if ports else None)


def request_spec(job):
    """The delivery engine's view of the job's request."""
    timeout = float(job.timeout_seconds or 0)
    return RequestSpec(
        url=job.url, method=job.method, headers=job.headers or {}, body=job.body or "",
        body_format=job.body_format, auth=job.auth or None, timeout=timeout,
        connect_timeout=min(CONNECT_TIMEOUT_SECONDS, timeout) or CONNECT_TIMEOUT_SECONDS,
        follow_redirects=job.follow_redirects,
    )


def platform_min_interval():
    """The smallest interval any plan allows: below it no upgrade helps."""
    return Plan.objects.aggregate(floor=Min("min_interval_seconds"))["floor"] or 0


# --- the checks


def _schedule_problems(job, now):
    out_of_range = instant_problems(**{"schedule.at": job.run_at, "start_at": job.start_at, "end_at": job.end_at})
    if out_of_range:
        return out_of_range
    floor = platform_min_interval()
    try:
        validate_schedule(job_schedule(job), now=now, min_interval_seconds=floor,
                          start_at=job.start_at, end_at=job.end_at)
    except ScheduleError as exc:
        if exc.code == "interval_too_short":  # the engine's text would blame the plan
            return [Problem(exc.code, exc.field, f"{exc.field}: the schedule runs more often than any plan "
                                                 f"allows (at most once every {format_duration(floor)}); "
                                                 "choose a less frequent schedule.")]
        return [Problem(exc.code, exc.field, exc.message)]
    return []


def _request_problems(job, *, url_changed):
    problems = []
    if url_changed:
        try:
            check_url_at_save(job.url, outbound_policy())
        except ForbiddenTarget as exc:
            problems.append(Problem("forbidden_target", "request.url",
                                    f"request.url: {exc.reason}; give a public http(s) address."))
    try:
        validate_spec(request_spec(job), max_timeout=MAX_TIMEOUT_SECONDS)
    except InvalidRequest as exc:
        problems.append(_from_delivery(exc, "request.", _REQUEST_PATHS))
    return problems


def _success_problems(job):
    try:
        codes = parse_status_codes(job.success_status_codes)
        validate_criteria(SuccessCriteria(status_codes=codes, body_contains=job.success_body_contains or None,
                                          body_regex=job.success_body_regex or None))
    except InvalidRequest as exc:
        return [_from_delivery(exc, "success.", {})]
    return []


def _retry_problems(job):
    if job.retry_max_delay_seconds < job.retry_initial_delay_seconds:
        return [Problem("invalid_retry", "retry.max_delay_seconds",
                        "retry.max_delay_seconds: give at least retry.initial_delay_seconds.")]
    return []


def _from_delivery(exc, prefix, paths):
    field = paths.get(exc.field) or (prefix + exc.field if exc.field else prefix.rstrip("."))
    return Problem(exc.code, field, f"{field}: {exc.message}")


# --- plan limits


def _check_plan(job, plan, now, changed):
    if changed & SCHEDULE_FIELDS:
        _check_frequency(job, plan, now)
    if changed & REQUEST_FIELDS and job.timeout_seconds > plan.max_timeout_seconds:
        raise PlanLimit(
            limit="max_timeout_seconds", field="request.timeout_seconds",
            plan=_cheapest_plan(lambda p: p.max_timeout_seconds >= job.timeout_seconds),
            message=f"request.timeout_seconds: your plan ({plan.name}) allows at most "
                    f"{plan.max_timeout_seconds} seconds.",
        )
    if changed & RETRY_FIELDS and job.max_attempts > plan.max_attempts:
        raise PlanLimit(
            limit="max_attempts", field="retry.max_attempts",
            plan=_cheapest_plan(lambda p: p.max_attempts >= job.max_attempts),
            message=f"retry.max_attempts: your plan ({plan.name}) allows at most {plan.max_attempts} attempts.",
        )


def _check_frequency(job, plan, now):
    error = _frequency_error(job, plan.min_interval_seconds, now)
    if error is None:
        return
    raise PlanLimit(
        limit="min_interval_seconds", field=error.field, reason="interval_too_short", message=error.message,
        plan=_cheapest_plan(lambda p: _frequency_error(job, p.min_interval_seconds, now) is None),
    )


def _frequency_error(job, min_interval_seconds, now):
    try:
        validate_schedule(job_schedule(job), now=now, min_interval_seconds=min_interval_seconds,
                          start_at=job.start_at, end_at=job.end_at)
    except ScheduleError as exc:
        if exc.code == "interval_too_short":
            return exc
        raise
    return None


def _cheapest_plan(allows):
    """Code of the cheapest plan for which ``allows(plan)`` holds, or None."""
    for candidate in Plan.objects.order_by("monthly_price_cents", "code"):
        if allows(candidate):
            return candidate.code
    return None
