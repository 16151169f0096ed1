"""A worker's side of a run: claim a batch, admit each run, send, record.

The HTTP requests of a batch run concurrently on the process's delivery loop (one event
loop thread, cronsvc.delivery.aio), so one slow endpoint never holds up the other runs of
its batch; the database work stays on the task's own thread (a handful of connections per
process, whatever the in-flight count).

The per-run costs that are not the request itself are paid once per batch or group
(measured in bench/bench_delivery.py): one claim for the batch; the admission checks of
every run in one Redis round trip per kind of check; and results recorded in groups as they
come back — whatever has finished when a result arrives, plus what finishes within
``GROUP_WAIT`` seconds — with one transaction and a few set-based statements per group, and
one Redis round trip to feed the circuit breakers and give back the concurrency slots. A
slow response therefore delays the recording of the fast ones by at most ``GROUP_WAIT``.

A process has DELIVERY_MAX_INFLIGHT slots, one per run from before its claim until its
result is recorded: a claimed run is sent at once, never queued behind others while its
lease runs out, and a full process claims nothing more. A task waits for its runs at most
DELIVERY_HANDOFF_SECONDS; runs still waiting for their endpoint then go on, and the
process's late recorder (one thread, its own connection) records them, so a hanging
endpoint holds neither a task thread nor its message.

Fenced leases (docs/architecture.md): each claim gives a run a new lease token and a short
lease on the database's clock, which the process's heartbeat (leases.py) renews from the
claim until the result is recorded; every write for the run is conditional on the token
(recording.py). If the process dies or stops, its leases end within LEASE_SECONDS and the
sweeper takes the runs back; what it records later is superseded.
"""

import logging
import os
import queue
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from functools import lru_cache
from types import MappingProxyType

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.utils import timezone

import cronsvc
from apps.jobs.validation import request_spec  # the one request spec (also the test run's)
from apps.sql.modes import on_postgresql
from apps.sql.planning import reach_rows_by_key
from cronsvc.delivery.aio import deliver_async
from cronsvc.delivery.breaker import COUNTED_FAILURES, host_key
from cronsvc.delivery.errors import InvalidRequest
from cronsvc.delivery.masking import masked
from cronsvc.delivery.outcome import CANCELLED, SuccessCriteria, circuit_open, classify, parse_status_codes
from cronsvc.delivery.request import PreparedDelivery, prepare, standard_variables
from cronsvc.delivery.retry import RetryPolicy, next_delay, parse_retry_after, should_retry
from cronsvc.delivery.template import UpstreamResult, WorkflowVariables, upstream_key

from .. import events, queries
from ..usage import quota

from . import recording, scripts
from .cancel_watch import cancel_watch
from .jobcache import JobCache
from .leases import heartbeat
from .logcontext import about_run, set_run
from ..models import Execution
from .outbound import delivery_loop, guards, http_session, outbound_policy, wall_clock

log = logging.getLogger("cronsvc.worker")

S = Execution.Status
RETRY_AFTER_STATUSES = (429, 503)
# Once a result is back, how long to wait for more before recording them together.
GROUP_WAIT = 0.02
_rng = random.SystemRandom()


@dataclass
class Run:
    execution: Execution
    holder: str = ""
    has_slot: bool = False
    job_locked: bool = False
    attempt_number: int = 0
    started_at: object = None
    prepared: object = None
    sent_headers: dict = field(default_factory=dict)
    cancellation: object = None  # set while its request is in flight (cancel_watch)
    # Read for every check of admission and recording: taken once from the claimed execution.
    job: object = field(init=False, repr=False)
    plan: object = field(init=False, repr=False)

    def __post_init__(self):
        self.job = self.execution.job
        self.plan = self.execution.organization.plan

    @property
    def lease_seconds(self):
        return self.job.timeout_seconds + settings.DELIVERY_LEASE_MARGIN


def run_batch(execution_ids, *, now=None):
    """Run the queued executions among ``execution_ids``; return how many were sent.

    Returns once every run has been recorded, or after DELIVERY_HANDOFF_SECONDS: runs
    still waiting for their endpoint then go on in the background and the process's late
    recorder records them, so a hanging endpoint holds neither this task's thread nor its
    message."""
    ids = list(dict.fromkeys(execution_ids))
    capacity = _capacity()
    sent = 0
    while ids:
        # A slot per run before its claim: a claimed run is sent at once (its lease does
        # not run out while it waits for a place) and a process at DELIVERY_MAX_INFLIGHT
        # claims nothing more until some finishes. Short of slots, the batch goes in parts.
        slots = capacity.take_up_to(len(ids))
        part, ids = ids[:slots], ids[slots:]
        sent += _run_some(part, now, capacity, slots)
    return sent


def _run_some(ids, now, capacity, slots):
    admitted, claimed = [], []
    try:
        claimed, now = claim_with_clock(ids, now)
        admitted = admit_all([Run(execution) for execution in claimed], now)
    finally:
        capacity.give(slots - len(admitted))
        kept = {run.execution.id for run in admitted}
        heartbeat().release([e.id for e in claimed if e.id not in kept])  # skipped, deferred, failed
    if not admitted:
        return 0
    mailbox = _Mailbox()
    _start_sends(admitted, mailbox)
    pending, error = len(admitted), None
    handoff_at = time.monotonic() + settings.DELIVERY_HANDOFF_SECONDS
    try:
        while pending:
            group = _next_group(mailbox.queue, pending, handoff_at)
            if not group:
                break
            pending -= len(group)
            error = record_finished(group, capacity) or error
    finally:
        if pending:
            _late_recorder().adopt(mailbox, pending)
    if error is not None:
        raise error
    return len(admitted)


def record_finished(group, capacity):
    """Record a group of finished sends ([(run, result, exception, finished at)]) and give
    their slots back. Returns the first exception a send raised, if any."""
    sent, error = [], None
    for run, result, exc, finished_at in group:
        if exc is None:
            sent.append((run, result, finished_at))
        else:
            # A bug, not a delivery failure (deliver_async() reports network trouble as a
            # result): the run stays ``running`` until its lease ends and the sweeper
            # hands it back; the others are still recorded.
            with about_run(run.execution):
                log.error("execution %s: sending failed", run.execution.id, exc_info=exc)
            error = error or exc
    try:
        record_group(sent, release=[item[0] for item in group])
    finally:
        capacity.give(len(group))
        # recorded, superseded or failed to record: no longer this process's to renew (a run
        # left ``running`` then is taken back by the sweeper when its lease ends)
        heartbeat().release([item[0].execution.id for item in group])
    return error


class _Mailbox:
    """Where a batch's sends put their results: the batch's queue, or the late
    recorder's once the batch has handed its remaining runs over."""

    def __init__(self):
        self.queue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._forward = None

    def put(self, item):
        with self._lock:
            (self._forward or self.queue).put(item)

    def forward_to(self, target):
        with self._lock:
            self._forward = target
            while True:
                try:
                    target.put(self.queue.get_nowait())
                except queue.Empty:
                    return


def _start_sends(runs, mailbox):
    """Send ``runs``, each result into ``mailbox``, on the process's delivery loop (one
    call hands it the whole batch). Script jobs run on the process's script threads
    instead (scripts.py)."""
    for run in [run for run in runs if scripts.is_script(run.job)]:
        scripts.pool().submit(_run_script_into, mailbox, run)
    runs = [run for run in runs if not scripts.is_script(run.job)]
    session, policy, watch = http_session(), outbound_policy(), cancel_watch()
    loop = delivery_loop().loop
    loop.call_soon_threadsafe(_create_send_tasks, loop, runs, mailbox, session, policy, watch)


_in_flight_tasks = set()  # the loop keeps only weak references to its tasks


def _create_send_tasks(loop, runs, mailbox, session, policy, watch):
    for run in runs:
        task = loop.create_task(_send_async(mailbox, run, session, policy, watch))
        _in_flight_tasks.add(task)
        task.add_done_callback(_in_flight_tasks.discard)


async def _send_async(mailbox, run, session, policy, watch):
    set_run(run.execution)  # this task's log lines name the run it sends
    try:
        run.cancellation = watch.watch(run.execution.id, run.execution.job_id)
        result = await deliver_async(run.prepared, session=session, policy=policy,
                                     max_body_bytes=settings.RESPONSE_BODY_MAX_BYTES, cancellation=run.cancellation)
    except BaseException as exc:  # noqa: BLE001 - handed to the recording thread, which logs it
        mailbox.put((run, None, exc, None))
        if not isinstance(exc, Exception):
            raise
    else:
        # aiohttp logs nothing per request (requests' urllib3 did): this is the send's line
        log.debug("sent: %s, %.0f ms", result.status_code or result.error_kind, result.duration_ms)
        mailbox.put((run, result, None, timezone.now()))
    finally:
        watch.forget(run.execution.id)


def _run_script_into(mailbox, run):
    set_run(run.execution)
    try:
        result = scripts.execute(run.job, run.plan)
    except BaseException as exc:  # noqa: BLE001 - handed to the recording thread, which logs it
        mailbox.put((run, None, exc, None))
    else:
        mailbox.put((run, result, None, timezone.now()))


def _next_group(results, pending, until=None):
    """The next results to record: block for one (until the monotonic time ``until`` at
    most: [] then), then take what else finishes within GROUP_WAIT seconds (or until all
    ``pending`` are in)."""
    try:
        group = [results.get(timeout=None if until is None else max(0.0, until - time.monotonic()))]
    except queue.Empty:
        return []
    deadline = time.monotonic() + GROUP_WAIT
    while len(group) < pending:
        try:
            group.append(results.get_nowait())
            continue
        except queue.Empty:
            pass
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            group.append(results.get(timeout=left))
        except queue.Empty:
            break
    return group


# The columns running a claimed execution reads (here and in recording.py): each run comes
# with its job, and building every column of a model costs a worker CPU on every run
# (bench/README.md, "Figures behind the code"). A column used later must be added here, or each run pays a query to load it
# (test_grouping.py counts the queries of a batch).
CLAIMED_FIELDS = (
    "id", "job", "organization", "scheduled_for", "attempt", "trigger",
    "job__project", "job__organization", "job__name", "job__url", "job__method", "job__headers", "job__secret_headers",
    "job__body", "job__body_format", "job__auth", "job__timeout_seconds", "job__connect_timeout_seconds",
    "job__follow_redirects",
    "job__success_status_codes", "job__success_body_contains", "job__success_body_regex",
    "job__max_attempts", "job__retry_initial_delay_seconds", "job__retry_max_delay_seconds",
    "job__retry_multiplier", "job__retry_on_timeout", "job__overlap_policy", "job__rate_limit_per_minute",
    "upstream_executions", "lease_token",
    "job__kind", "job__script_language", "job__script_source", "job__script_env", "job__script_allow_network",
)
PROJECT_FIELDS = ("id", "organization", "signing_secrets")
PLAN_FIELDS = ("plan", "plan__code", "plan__max_concurrency", "plan__max_attempts", "plan__auto_disable_after_failures",
               "plan__over_quota", "plan__monthly_executions",
               "plan__script_wall_seconds", "plan__script_cpu_seconds", "plan__script_memory_mb",
               "plan__script_max_processes", "plan__script_output_kib", "plan__script_tmp_mb")


# The claim reads the execution's own columns and its job's stamp; the job comes from the
# process's cache (jobcache.py).
EXECUTION_FIELDS = tuple(name for name in CLAIMED_FIELDS if not name.startswith("job__"))
JOB_FIELDS = tuple(name.removeprefix("job__") for name in CLAIMED_FIELDS if name.startswith("job__"))


def claim(execution_ids, now=None):
    """Move the queued runs among ``execution_ids`` that are due to ``running``, each under
    a new lease token, atomically: a duplicate or stale message finds nothing left to
    claim. On PostgreSQL one statement claims them, on the database's clock (a run not due
    yet by it is handed back, not sent early), and returns each run's columns and its job's
    stamp; the jobs come from the process's cache. The process's heartbeat renews the
    claimed runs' leases until they are recorded (leases.py)."""
    return claim_with_clock(execution_ids, now)[0]


def claim_with_clock(execution_ids, now=None):
    """``claim``, and the time of the claim: the database's (``now`` only for the embedded
    mode's SQLite, which has no clock of its own to trust more)."""
    if not on_postgresql():
        now = now or timezone.now()
        executions = _claim_by_orm(execution_ids, now)
        heartbeat().hold(executions)
        return executions, now
    with transaction.atomic():
        reach_rows_by_key()
        rows = queries.claim_queued(execution_ids, lease_seconds=settings.LEASE_SECONDS)
        width = len(queries.CLAIMED_COLUMNS)
        if rows:
            now = rows[0][width + 2]
        alias = connection.alias  # (the proxy's lookup costs more than building the row)
        executions = _with_jobs(
            [Execution.from_db(alias, queries.CLAIMED_COLUMNS, row[:width]) for row in rows],
            [tuple(row[width:width + 2]) for row in rows])
        events.changed(executions, S.RUNNING, S.QUEUED, now, attempt=lambda e: e.attempt + 1)
    heartbeat().hold(executions)
    if executions:
        _give_owners(executions, *queries.owners({e.job.project_id for e in executions},
                                                  {e.organization_id for e in executions}))
    return executions, now or timezone.now()


def _with_jobs(executions, stamps):
    """The claimed executions, each given its job from the process's cache as of its stamp
    ((version, updated_at), in the same order). A job deleted between the claim and the
    cache's load leaves its run out: it stays ``running`` until its lease ends, and the
    deleted job's purge removes it."""
    jobs = _job_cache().current({e.job_id: stamp for e, stamp in zip(executions, stamps)})
    kept = []
    for execution in executions:
        job = jobs.get(execution.job_id)
        if job is not None:
            _EXECUTION_JOB.set_cached_value(execution, job)
            kept.append(execution)
    return kept


def _claim_by_orm(execution_ids, now):
    """The claim elsewhere (the embedded mode's SQLite: one worker, no row locks)."""
    with transaction.atomic():
        executions = list(
            Execution.objects.select_for_update(skip_locked=True, of=("self",))
            .filter(id__in=execution_ids, status=S.QUEUED)
            .filter(scheduled_for__lte=now)
            .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now))
            .annotate(stamp_version=F("job__version"), stamp_updated_at=F("job__updated_at"))
            .only(*EXECUTION_FIELDS)
        )
        executions = _with_jobs(executions, [(e.stamp_version, e.stamp_updated_at) for e in executions])
        Execution.objects.filter(id__in=[e.id for e in executions]).update(
            status=S.RUNNING, started_at=now, lease_expires_at=now + timedelta(seconds=settings.LEASE_SECONDS),
            lease_token=F("lease_token") + 1)
        for execution in executions:
            execution.lease_token += 1
        events.changed(executions, S.RUNNING, S.QUEUED, now, attempt=lambda e: e.attempt + 1)
    _share_owners(executions)
    return executions


def _share_owners(executions):
    """Give the runs of one project (and of one organization) the same Project (and
    Organization with its plan) object, loaded once per batch: a batch's runs belong to a
    few tenants, and building and decrypting the same rows for every run cost more than
    the two queries."""
    if not executions:
        return
    from apps.accounts.models import Organization
    from apps.projects.models import Project

    projects = Project.objects.only(*PROJECT_FIELDS).in_bulk({e.job.project_id for e in executions})
    organizations = (Organization.objects.select_related("plan").only(*PLAN_FIELDS)
                     .in_bulk({e.organization_id for e in executions}))
    _give_owners(executions, projects, organizations)


def _give_owners(executions, projects, organizations):
    for execution in executions:
        _JOB_PROJECT.set_cached_value(execution.job, projects[execution.job.project_id])
        _EXECUTION_ORGANIZATION.set_cached_value(execution, organizations[execution.organization_id])


# A claimed run's job and owners are given to it as ``select_related`` gives them: into the
# instance's cache of related objects. The descriptor's assignment (``execution.job = job``)
# checks and copies what these already agree on (each was looked up by that id) and cost a
# worker ~1.7 us a run for each of the three (bench/README.md, "Figures behind the code").
_EXECUTION_JOB = Execution._meta.get_field("job")
_EXECUTION_ORGANIZATION = Execution._meta.get_field("organization")
_JOB_PROJECT = _EXECUTION_JOB.related_model._meta.get_field("project")


def admit_all(runs, now):
    """Apply the overlap lock, the organization's concurrency cap, the host's circuit
    breaker and the job's rate limit, in that order, each check for all runs of the batch
    in one round trip. Returns the runs that may be sent now (prepared); the others are
    skipped, deferred or failed here."""
    shared = guards()
    for run in runs:
        run.holder = str(run.execution.id)
    # 0. the monthly quota: past it, a plan that blocks skips the run
    runs = _within_quota(runs, now)
    # 1. overlap: a job whose previous run is still going is skipped
    forbid = [run for run in runs if run.job.overlap_policy == run.job.OverlapPolicy.FORBID]
    if forbid:
        locked = shared.lock_jobs([(str(run.job.id), run.holder, run.lease_seconds) for run in forbid])
        for run, ok in zip(forbid, locked):
            run.job_locked = ok
            if not ok:
                recording.skip_running(run.execution, "overlap", now)
        runs = [run for run in runs if run.job_locked or run.job.overlap_policy != run.job.OverlapPolicy.FORBID]
    # 2. the organization's concurrency cap: the excess waits
    if runs:
        slots = shared.acquire_many(
            [(run.execution.organization_id, run.plan.max_concurrency, run.lease_seconds, run.holder) for run in runs],
            wall_clock())
        waiting = []
        for run, ok in zip(runs, slots):
            run.has_slot = ok
            if not ok:
                waiting.append(run)
                recording.defer_running(run.execution, now + timedelta(seconds=_defer_seconds()), now=now)
        if waiting:
            release_all(waiting)
            runs = [run for run in runs if run.has_slot]
    # 3. the host's circuit breaker
    if runs and shared.breaker is not None:
        clock = wall_clock()
        sending = [run for run in runs if not scripts.is_script(run.job)]
        hosts = [host_key(run.job.url) for run in sending]
        held = []
        for run, host, decision in zip(sending, hosts, shared.circuit_many(hosts, clock)):
            if not decision.allowed:
                held.append(run)
                _defer_for_circuit(run, host, decision, now)
        if held:
            release_all(held)
            runs = [run for run in runs if run.has_slot]
    # 4. the job's rate limit
    limited = [run for run in runs if run.job.rate_limit_per_minute]
    if limited:
        tokens = shared.take_tokens([(str(run.job.id), run.job.rate_limit_per_minute) for run in limited],
                                    wall_clock())
        held = []
        for run, (allowed, wait) in zip(limited, tokens):
            if not allowed:
                held.append(run)
                recording.defer_running(run.execution, now + timedelta(seconds=max(wait, 0.5)), now=now)
        if held:
            release_all(held)
            runs = [run for run in runs if run.has_slot]
    # 5. the organization's rate to one host, across all its jobs
    runs = _within_host_rate(runs, shared, now)
    return [run for run in runs if _prepare(run, now)]


def host_rate_per_minute(plan_code):
    rates = settings.HOST_RATE_PER_MINUTE
    return rates.get(plan_code, rates.get("*"))


def _within_host_rate(runs, shared, now):
    """A customer cannot make us send more than their plan's rate to one host, however many
    jobs point at it: a token bucket per (organization, host), one round trip per batch.
    Runs over the rate wait their turn (the k-th held run of a host k tokens later)."""
    limited = [(run, host_rate_per_minute(run.plan.code)) for run in runs if not scripts.is_script(run.job)]
    limited = [(run, rate) for run, rate in limited if rate]
    if not limited:
        return runs
    # A minute's worth may go at once (cron jobs fire together on the minute).
    keys = [(f"host:{run.execution.organization_id}:{host_key(run.job.url)}", rate, rate) for run, rate in limited]
    held, position = [], {}
    for (run, rate), (key, _, _), (allowed, wait) in zip(limited, keys, shared.take_tokens(keys, wall_clock())):
        if not allowed:
            position[key] = position.get(key, 0) + 1
            held.append(run)
            recording.defer_running(run.execution, now + timedelta(seconds=max(wait, 0.5) + position[key] * 60 / rate),
                                     now=now)
    if held:
        release_all(held)
        return [run for run in runs if run.has_slot]
    return runs


def _within_quota(runs, now):
    refused = quota.over_quota([(run.execution.organization_id, run.plan) for run in runs], now)
    for run, skip in zip(runs, refused):
        if skip:
            recording.skip_running(run.execution, quota.SKIP_REASON, now)
    return [run for run, skip in zip(runs, refused) if not skip]


def _defer_seconds():
    base = settings.DELIVERY_DEFER_SECONDS
    return base + _rng.uniform(0, base)


def _defer_for_circuit(run, host, decision, now):
    retry_at = decision.retry_at or wall_clock() + settings.BREAKER_COOLDOWN_SECONDS
    outcome = circuit_open(host, retry_at)
    until = now + timedelta(seconds=max(1.0, retry_at - wall_clock()))
    recording.defer_running(run.execution, until, error_kind=outcome.error_kind, error_message=outcome.message,
                             now=now)


def _prepare(run, now):
    execution, job = run.execution, run.job
    run.attempt_number = execution.attempt + 1
    run.started_at = now
    if scripts.is_script(run.job):
        return True
    try:
        run.prepared = prepare(
            request_spec(job),
            variables=_variables(run, now),
            job_id=job.id, execution_id=execution.id, attempt=run.attempt_number,
            scheduled_for=execution.scheduled_for, signing_secrets=job.project.signing_secrets,
            timestamp=int(now.timestamp()), version=cronsvc.__version__,
        )
    except InvalidRequest as exc:
        release_all([run])
        recording.fail_running(execution, error_kind="invalid_request", error_message=exc.message, now=now,
                               auto_disable_after=run.plan.auto_disable_after_failures)
        return False
    return True


def _variables(run, now):
    """What the body template may read; none for a body without a placeholder, which reads
    nothing (formatting them cost every run, templated or not)."""
    execution, job = run.execution, run.job
    if "{{" not in (job.body or ""):
        return _NO_VARIABLES
    return _with_upstream(execution, standard_variables(
        job_id=job.id, job_name=job.name, execution_id=execution.id,
        scheduled_for=execution.scheduled_for, attempt=run.attempt_number, now=now,
    ))


_NO_VARIABLES = MappingProxyType({})


def _with_upstream(execution, variables):
    """A run its upstream jobs started may read their results (``{{ upstream.<name>.… }}``):
    one query, only for such runs."""
    if not execution.upstream_executions:
        return variables
    rows = Execution.objects.filter(id__in=execution.upstream_executions).order_by("id").values_list(
        "job__name", "status", "response_status", "response_body")
    return WorkflowVariables(variables, {upstream_key(name): UpstreamResult(outcome=status, status=code, body=body)
                                         for name, status, code, body in rows})


def record_group(sent, *, release=()):
    """Record the finished runs ``sent`` ([(run, DeliveryResult, finished at)]) together; then, in one
    Redis round trip, feed the circuit breakers with their results and give back the slots
    and locks of the runs in ``release``."""
    successes, failures = [], []
    try:
        _record(sent, successes, failures)
    finally:
        _settle(release, successes, failures)


def _record(sent, successes, failures):
    if not sent:
        return
    results = []
    for run, result, finished in sent:
        job, plan = run.job, run.plan
        script = scripts.is_script(job)
        outcome = scripts.outcome(result) if script else classify(result, success_criteria(job))
        if script:
            pass  # no host behind it: no circuit breaker
        elif outcome.error_kind in COUNTED_FAILURES:
            failures.append(host_key(job.url))
        elif result.status_code is not None:
            successes.append(host_key(job.url))
        policy = None if outcome.succeeded else retry_policy(job, plan)
        status, next_attempt_at = decide(outcome, result, run.attempt_number, policy, finished)
        cancelled = result.error_kind == CANCELLED  # the run is already cancelled: no retry, no verdict
        if cancelled:
            status, next_attempt_at = S.CANCELLED, None
        prepared = run.prepared or _NO_REQUEST
        results.append(recording.FinishedAttempt(
            execution=run.execution, status=status, next_attempt_at=next_attempt_at,
            auto_disable_after=plan.auto_disable_after_failures,
            attempt=recording.AttemptValues(
                number=run.attempt_number, started_at=run.started_at, finished_at=finished,
                duration_ms=round(result.duration_ms), request_method=prepared.method,
                request_url=prepared.url, request_headers=masked(prepared.headers, job.secret_header_names()),
                request_body=_text(prepared.body), response_status=result.status_code,
                response_headers=masked(result.headers), response_body=result.body_excerpt,
                remote_addr=result.remote_addr or "",
                outcome=CANCELLED if cancelled else "succeeded" if outcome.succeeded else "failed",
                error_kind=outcome.error_kind or "", error_message="" if outcome.succeeded else outcome.message,
            ),
        ))
    recording.record_attempts(results)


_NO_REQUEST = PreparedDelivery(method="", url="", headers={}, body=b"", connect_timeout=0, timeout=0,
                               follow_redirects=False, max_redirects=0)  # a script run sends none


def decide(outcome, result, attempt, policy, now):
    """The execution's next status, and when to retry (None when final)."""
    if outcome.succeeded:
        return S.SUCCEEDED, None
    if should_retry(outcome, result.status_code, attempt, policy):
        retry_after = None
        if result.status_code in RETRY_AFTER_STATUSES:
            retry_after = parse_retry_after(result.headers.get("retry-after"), now)
        delay = next_delay(attempt, policy, retry_after=retry_after, rng=_rng)
        return S.QUEUED, now + timedelta(seconds=delay)
    retryable_kind = should_retry(outcome, result.status_code, min(attempt, policy.max_attempts - 1), policy)
    if retryable_kind:
        return S.DEAD, None
    if outcome.error_kind == "timeout":
        return S.TIMED_OUT, None
    return S.FAILED, None


def success_criteria(job):
    return _criteria(job.success_status_codes or "200-299", job.success_body_contains or None,
                     job.success_body_regex or None)


@lru_cache(maxsize=1024)
def _criteria(status_codes, body_contains, body_regex):
    # Parsed once per distinct setting (a frozen value), not once per delivery.
    return SuccessCriteria(status_codes=parse_status_codes(status_codes), body_contains=body_contains,
                           body_regex=body_regex)


def retry_policy(job, plan):
    return RetryPolicy(
        max_attempts=max(1, min(job.max_attempts, plan.max_attempts)),
        initial_delay=job.retry_initial_delay_seconds, max_delay=job.retry_max_delay_seconds,
        multiplier=job.retry_multiplier, retry_on_timeout=job.retry_on_timeout,
    )


def _text(body):
    return body.decode("utf-8", errors="replace")[: settings.RESPONSE_BODY_MAX_BYTES]


def release_all(runs):
    """Give back the runs' concurrency slots (one round trip) and their overlap locks."""
    _settle(runs, (), ())


def _settle(runs, successes, failures):
    shared = guards()
    if shared.breaker is None:
        successes = failures = ()
    holding = [run for run in runs if run.has_slot]
    locked = [run for run in runs if run.job_locked]
    shared.settle_many(successes=successes, failures=failures, now=wall_clock(),
                       releases=[(run.execution.organization_id, run.holder) for run in holding],
                       unlocks=[(str(run.job.id), run.holder) for run in locked])
    for run in holding:
        run.has_slot = False
    for run in locked:
        run.job_locked = False


_pool = {"pid": None, "capacity": None, "late": None, "jobs": None}
_pool_lock = threading.Lock()


def _process_local(name, make):
    """One of each per process (made after a fork, never inherited from the parent)."""
    with _pool_lock:
        if _pool["pid"] != os.getpid():
            _pool.update(pid=os.getpid(), capacity=None, late=None, jobs=None)
        if _pool[name] is None:
            _pool[name] = make()
        return _pool[name]


def _capacity():
    return _process_local("capacity", lambda: _Capacity(settings.DELIVERY_MAX_INFLIGHT))


def _job_cache():
    return _process_local("jobs", lambda: JobCache(JOB_FIELDS))


def _late_recorder():
    return _process_local("late", _LateRecorder)


class _Capacity:
    """The runs one process may have in flight: a slot per run, from before its claim
    until its result is recorded."""

    def __init__(self, size):
        self.size = size
        self._free = size
        self._cond = threading.Condition()

    def take_up_to(self, count):
        """Take as many free slots as there are, up to ``count``; first wait until there
        are ``count`` or an eighth of them (a busy process then claims in parts of a fair
        size rather than run by run)."""
        wanted = min(count, max(1, self.size // 8))
        with self._cond:
            while self._free < wanted:
                self._cond.wait()
            taken = min(count, self._free)
            self._free -= taken
        return taken

    def give(self, count):
        if count:
            with self._cond:
                self._free += count
                self._cond.notify_all()

    @property
    def in_use(self):
        with self._cond:
            return self.size - self._free


class _LateRecorder:
    """A thread per process that records the runs whose task stopped waiting for them
    (DELIVERY_HANDOFF_SECONDS), in groups, on its own database connection."""

    def __init__(self):
        self.results = queue.SimpleQueue()
        self._cond = threading.Condition()
        self._pending = 0
        threading.Thread(target=self._loop, name="delivery-late-recorder", daemon=True).start()

    def adopt(self, mailbox, count):
        with self._cond:
            self._pending += count
        mailbox.forward_to(self.results)

    def wait_idle(self, timeout):
        """Until every adopted run is recorded, or ``timeout`` seconds; True when idle."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending == 0, timeout)

    def _loop(self):
        from django.db import close_old_connections

        while True:
            group = _next_group(self.results, self._pending)
            try:
                # Its connection is kept (a short DELIVERY_HANDOFF_SECONDS makes most runs
                # late ones): only a broken or an old one is closed, as for a task.
                close_old_connections()
                record_finished(group, _capacity())
            except Exception:  # noqa: BLE001 - the runs' leases end and the sweeper retries them
                log.exception("recording %d late runs failed", len(group))
            finally:
                with self._cond:
                    self._pending -= len(group)
                    self._cond.notify_all()


def wait_for_late_runs(timeout):
    """At shutdown: give runs still in flight ``timeout`` seconds to finish and be recorded."""
    late = _pool["late"] if _pool["pid"] == os.getpid() else None
    return late is None or late.wait_idle(timeout)
