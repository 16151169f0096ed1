"""Is this job acceptable? Shared by the REST API and the web pages.

The checks work on a Job instance (saved or not) holding the proposed values, and only
on the parts that changed: editing a job's name must not fail because its one-off time
has passed since, or because the plan was lowered after the job was made.

Two kinds of refusal:
- JobInvalid (HTTP 400): the job is wrong whatever the plan, with the engine's codes
  (invalid_cron, never_fires, interval_too_short, invalid_header, forbidden_target,
  invalid_host, ...).
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

from apps.plans import limits
from apps.plans.limits import PlanLimit  # noqa: F401 (the API and pages catch it from here)
from apps.plans.models import Plan
from cronsvc.delivery.errors import InvalidRequest
from cronsvc.delivery.guard import ForbiddenTarget, check_url_at_save, outbound_policy
from cronsvc.delivery.outcome import SuccessCriteria, parse_status_codes, validate_criteria
from cronsvc.delivery.request import MAX_TIMEOUT_SECONDS, RequestSpec, validate_spec
from cronsvc.schedules import ScheduleError, validate_schedule
from cronsvc.schedules.describe import format_duration

from .queries import job_count
from .models import Job
from .scheduling import job_schedule

SCHEDULE_FIELDS = frozenset(
    {"schedule_type", "cron_expression", "interval_seconds", "run_at", "timezone", "start_at", "end_at"})
REQUEST_FIELDS = frozenset({"url", "method", "headers", "body", "body_format", "auth", "timeout_seconds",
                            "connect_timeout_seconds", "follow_redirects"})
SUCCESS_FIELDS = frozenset({"success_status_codes", "success_body_contains", "success_body_regex"})
RETRY_FIELDS = frozenset({"max_attempts", "retry_initial_delay_seconds", "retry_max_delay_seconds",
                          "retry_multiplier", "retry_on_timeout"})
#: The fields whose change moves a job's due time (services.reschedule).
RESCHEDULING_FIELDS = SCHEDULE_FIELDS | {"jitter_seconds"}
ALL_FIELDS = SCHEDULE_FIELDS | REQUEST_FIELDS | SUCCESS_FIELDS | RETRY_FIELDS | {"region"}

# Instants the API accepts: the schedule math works up to year 9998, and a run must be
# computable a year (plus jitter) past any instant a customer gives.
EARLIEST = datetime(1970, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(9000, 1, 1, tzinfo=timezone.utc)

# Engine field names -> the API's input paths.
_REQUEST_PATHS = {"timeout": "request.timeout_seconds", "connect_timeout": "request.connect_timeout_seconds",
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


def validate_job(job, *, plan, now, changed=ALL_FIELDS):
    """Raise JobInvalid or PlanLimit for ``job`` (its ``changed`` model fields)."""
    problems = []
    if changed & SCHEDULE_FIELDS:
        problems += _schedule_problems(job, plan, now)
    if changed & REQUEST_FIELDS and job.kind != job.Kind.SCRIPT:
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


# More creates than one organization can have in flight at once (web processes x threads):
# with this much room below max_jobs no concurrent create can overshoot it.
UNLOCKED_JOB_QUOTA_ROOM = 1000


def far_below_job_quota(organization, plan):
    """Whether ``organization`` has more than UNLOCKED_JOB_QUOTA_ROOM jobs of room left."""
    return job_count(organization.pk) + UNLOCKED_JOB_QUOTA_ROOM <= plan.max_jobs


def check_job_quota(organization, plan, adding=1):
    """PlanLimit when ``adding`` more jobs would exceed the plan's max_jobs. Call it with
    the organization row locked (select_for_update) so concurrent creates cannot overshoot."""
    limits.check_job_count(plan, job_count(organization.pk), adding)


def request_spec(job):
    """The delivery engine's view of the job's request: the one the worker sends, the job
    form's test run sends and validation checks. The connect timeout is the job's own, else
    the platform's DELIVERY_CONNECT_TIMEOUT (at most the whole timeout)."""
    timeout = float(job.timeout_seconds or 0)
    connect = job.connect_timeout_seconds
    if connect is None:
        connect = min(settings.DELIVERY_CONNECT_TIMEOUT, timeout) or settings.DELIVERY_CONNECT_TIMEOUT
    return RequestSpec(
        url=job.url, method=job.method, headers=job.request_headers(), body=job.body or "",
        body_format=job.body_format, auth=job.auth or None, timeout=timeout, connect_timeout=float(connect),
        follow_redirects=job.follow_redirects,
    )


def platform_min_interval():
    """The smallest interval any plan allows: below it no upgrade helps."""
    return Plan.objects.aggregate(floor=Min("min_interval_seconds"))["floor"] or 0


# --- the checks


def _schedule_problems(job, plan, now):
    if job.schedule_type == Job.ScheduleType.NONE:
        return []  # started by its upstream jobs; check_dependencies insists on one
    out_of_range = instant_problems(**{"schedule.at": job.run_at, "start_at": job.start_at, "end_at": job.end_at})
    if out_of_range:
        return out_of_range
    # The plan's own interval first: a schedule it allows is above the platform's floor too,
    # and the floor (a query over all plans) is read only for one it does not.
    error = _schedule_error(job, plan.min_interval_seconds, now)
    if error is not None and error.code == "interval_too_short":
        floor = platform_min_interval()
        error = _schedule_error(job, floor, now)
        if error is not None and error.code == "interval_too_short":  # the engine's text would blame the plan
            return [Problem(error.code, error.field, f"{error.field}: the schedule runs more often than any plan "
                                                     f"allows (at most once every {format_duration(floor)}); "
                                                     "choose a less frequent schedule.")]
    # No error left at the floor: too frequent for this plan only (_check_plan names one that allows it).
    return [] if error is None else [Problem(error.code, error.field, error.message)]


def _request_problems(job, *, url_changed):
    problems = []
    if url_changed:
        try:
            check_url_at_save(job.url, outbound_policy(settings))  # the one policy (guard.outbound_policy)
        except ForbiddenTarget as exc:  # forbidden_target, or invalid_host for a host no parser agrees on
            advice = "" if exc.code == "invalid_host" else "; give a public http(s) address"
            problems.append(Problem(exc.code, "request.url", f"request.url: {exc.reason}{advice}."))
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


# --- dependencies (workflows)


def check_dependencies(job, links):
    """JobInvalid unless ``links`` ([(upstream Job, on)], the job's whole new list) stay in
    the job's project and close no cycle. Call it with the project row locked, so two
    concurrent saves cannot close a cycle between them."""
    problems = [Problem("cross_project_dependency", f"dependencies.{index}.job",
                        f"dependencies.{index}.job: {upstream.name} is in another project; a job can only "
                        "depend on jobs of its own project.")
                for index, (upstream, _) in enumerate(links) if upstream.project_id != job.project_id]
    if not problems and links and job.pk is not None:  # without upstreams no cycle can close
        cycle = _cycle(job, {upstream.pk for upstream, _ in links})
        if cycle:
            problems.append(Problem("dependency_cycle", "dependencies",
                                    f"dependencies: {' → '.join(cycle)} would be a cycle; remove one of "
                                    "these dependencies."))
    if not problems and not links and job.schedule_type == Job.ScheduleType.NONE:
        problems.append(Problem("no_schedule", "schedule",
                                'schedule: a job with schedule {"type": "none"} runs only after its upstream '
                                "jobs; give it a dependency or a schedule."))
    if problems:
        raise JobInvalid(problems)


def _cycle(job, upstream_ids):
    """Names along job -> ... -> an upstream -> job, if the new upstreams close a cycle."""
    from .models import JobDependency

    edges = {}
    for upstream, downstream in JobDependency.objects.filter(downstream__project_id=job.project_id) \
            .exclude(downstream_id=job.pk).values_list("upstream_id", "downstream_id"):
        edges.setdefault(upstream, []).append(downstream)
    path = find_path(job.pk, upstream_ids, edges)
    if path is None:
        return None
    names = dict(Job.objects.filter(id__in=path).values_list("id", "name"))
    return [names[node] for node in path] + [job.name]


def find_path(start, targets, edges):
    """A path ``start`` -> ... -> t for some t in ``targets`` along ``edges`` {node: [next]}."""
    parents, stack = {start: None}, [start]
    while stack:
        node = stack.pop()
        if node in targets:
            path = []
            while node is not None:
                path.append(node)
                node = parents[node]
            return path[::-1]
        for following in edges.get(node, ()):
            if following not in parents:
                parents[following] = node
                stack.append(following)
    return None


# --- plan limits


def _check_plan(job, plan, now, changed):
    """The plan's limits, from apps.plans.limits (every limit is enforced there)."""
    if changed & SCHEDULE_FIELDS:
        limits.check_frequency(plan, too_frequent(job, now))
    if changed & REQUEST_FIELDS:
        limits.check_timeout(plan, job.timeout_seconds)
    if changed & RETRY_FIELDS:
        limits.check_attempts(plan, job.max_attempts)


def plan_violations(job, plan, now):
    """Every plan limit ``job`` breaks on ``plan`` (a downgrade pauses such jobs)."""
    def frequency(min_interval_seconds):
        try:
            return _frequency_error(job, min_interval_seconds, now)
        except ScheduleError:  # e.g. a finished one-off job: no frequency to judge
            return None

    return limits.job_violations(plan, timeout_seconds=job.timeout_seconds, max_attempts=job.max_attempts,
                                 too_frequent=frequency)


def check_resumable(job, plan, now):
    """PlanLimit (the first limit broken) when resuming ``job`` would run it beyond ``plan``
    (e.g. a job a downgrade paused, resumed before an upgrade or an edit)."""
    violations = plan_violations(job, plan, now)
    if violations:
        raise violations[0]


def too_frequent(job, now):
    """``min_interval_seconds -> ScheduleError or None`` for ``job``'s schedule."""
    return lambda min_interval_seconds: _frequency_error(job, min_interval_seconds, now)


def _frequency_error(job, min_interval_seconds, now):
    if job.schedule_type == Job.ScheduleType.NONE:
        return None  # no schedule: it runs as often as its upstream jobs do
    error = _schedule_error(job, min_interval_seconds, now)
    if error is not None and error.code != "interval_too_short":
        raise error
    return error


def _schedule_error(job, min_interval_seconds, now):
    """The ScheduleError of ``job``'s schedule at ``min_interval_seconds``, or None."""
    try:
        validate_schedule(job_schedule(job), now=now, min_interval_seconds=min_interval_seconds,
                          start_at=job.start_at, end_at=job.end_at)
    except ScheduleError as exc:
        return exc
    return None
