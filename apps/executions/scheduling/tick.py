"""One scheduler tick: claim due jobs, record their occurrences once, advance them.

Safe with any number of schedulers: on PostgreSQL the due jobs are locked with
``FOR UPDATE SKIP LOCKED`` so two schedulers never hold the same job, the Execution
rows and the new ``next_run_at`` are written in the same transaction, and the unique
(job, scheduled_for, trigger) constraint refuses a duplicate occurrence whatever happens.
Publishing happens only after the commit (see publishing.py); what is never published
is found by the sweeper.

The cost per claimed job decides how many jobs a scheduler can dispatch per second
(bench/bench_scheduler.py), so a tick does two statements whatever the batch size:
one query claims the jobs with everything the tick needs (their organization's state
and, for overlap ``forbid``, whether a run is unfinished) as plain tuples, no model
instances; one statement inserts the executions and advances the jobs (a data-modifying
CTE). On PostgreSQL the query runs on a binary cursor and the writes send their columns
as binary arrays (``unnest``), so nothing is quoted into SQL text and nothing is decoded
in Python that psycopg can decode in C. SQLite (embedded mode) keeps the ORM.

``now`` is the database's time (the loop reads it once per tick: docs/architecture.md,
"One clock"); nothing here reads the process's clock.

A job that missed more than MAX_DUE_SCAN occurrences (its schedulers were down) is caught
up MAX_DUE_SCAN occurrences a tick, oldest first, each recorded (skipped with its misfire
reason, or run as its policy says): its ``next_run_at`` moves to the first occurrence not
recorded yet, which is still due, so the next tick takes it again. None is dropped.
"""

import functools
import logging
import operator
import os
import uuid
from collections import namedtuple
from dataclasses import dataclass, field
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Case, F, OuterRef, Subquery, TextField, Value, When
from django.db.models.functions import Cast

from apps.accounts.models import Organization
from apps.eventstream import outbox
from apps.jobs.models import Job, JobDue
from apps.jobs.scheduling import due_after, due_time, job_jitter, job_schedule, occurrence_before
from apps.jobs.windowing import apply_windows
from apps.sql.modes import on_postgresql
from cronsvc.misfire import plan_catch_up
from cronsvc.schedules import next_run

from .. import events, queries
from ..models import Execution
from ..routing import queue_for

log = logging.getLogger(__name__)

#: how many due occurrences of one job a tick records; the rest wait for the next tick.
MAX_DUE_SCAN = 200
#: a stalled scheduler (SIGSTOP, GC pause, lost network) must not sit on its locks:
#: PostgreSQL aborts its transaction, the rows go to another scheduler, and the
#: stalled one's commit fails instead of acting on a stale view.
CLAIM_IDLE_TIMEOUT_MS = 10_000

CLAIM_FIELDS = [
    "id", "organization_id", "schedule_type", "cron_expression", "interval_seconds", "run_at",
    "timezone", "start_at", "end_at", "jitter_seconds", "misfire_policy", "misfire_grace_seconds",
    "overlap_policy", "region", "next_run_at", "created_at", "version",
]
#: Run control (docs/run-control.md): the priority routes its runs, the windows place them.
CLAIM_FIELDS += ["priority", "windows", "blackouts", "outside_window"]
#: A claimed job as a tick sees it: the claim fields, its organization's state (its plan's
#: queue, None while the organization is suspended) and (for overlap ``forbid`` only) the
#: id of a run of it still queued or running. It quacks like a Job for
#: apps.jobs.scheduling (job_schedule, due_time, ...).
ClaimedJob = namedtuple("ClaimedJob", [*CLAIM_FIELDS, "org_queue", "unfinished_run"])

QUEUED = Execution.Status.QUEUED.value
SKIPPED = Execution.Status.SKIPPED.value
SCHEDULE = Execution.Trigger.SCHEDULE.value
FORBID = Job.OverlapPolicy.FORBID.value
LOW = Job.Priority.LOW.value
OVERLOAD = "overload"
RUN_ALL = Job.MisfirePolicy.RUN_ALL.value
RUN_ONCE = Job.MisfirePolicy.RUN_ONCE.value


@dataclass
class TickResult:
    claimed: int = 0
    created: int = 0
    skipped: int = 0
    expired: int = 0
    deferred: int = 0  # held for a window's opening or while the plan's queue is overloaded
    to_publish: list = field(default_factory=list)  # (execution id, queue, due_at)


#: One occurrence to insert (ids are made for the whole batch, see _uuid7s); every other
#: Execution column takes the model's default. ``job_version`` comes with the claimed job
#: (its ``version`` column): no query of its own.
_Row = namedtuple("_Row", ["job_id", "organization_id", "job_version", "scheduled_for", "status", "skip_reason",
                           "queue", "published_at", "finished_at"])
#: Run control's columns (docs/run-control.md), set only on a deferred run: published
#: later (by sweeper.due_retries, at ``next_attempt_at`` or once the queue drains).
_Row = namedtuple("_Row", [*_Row._fields, "next_attempt_at", "deferred_from", "defer_reason"],
                  defaults=(None, None, ""))
#: The jitter a queued run is due after its occurrence (lateness leaves it out).
_Row = namedtuple("_Row", [*_Row._fields, "jitter_seconds"], defaults=(None, None, "", 0))


# What the tick needs besides the job's own columns comes from correlated scalar
# subqueries, not joins: the claim query then reads jobs_jobdue alone, and PostgreSQL walks
# the jobdue_due index in order and stops after batch_size rows whatever its statistics
# say. (With joins, stale statistics after a burst of due jobs led it to join and sort
# every due job on every tick: 0.5 s a tick with 200k due, so the backlog drained
# quadratically.) EXISTS is avoided for the same reason: it may be planned as a hashed
# subplan that reads every unfinished execution on every tick.
#: The organization's state in one subquery (one probe of its key a job, not two): its plan's
#: queue, or None while it is suspended (a plan's queue is never null).
_ORG_QUEUE = Subquery(
    Organization.objects.filter(id=OuterRef("job__organization_id")).order_by()
    .annotate(queue_unless_suspended=Case(When(suspended=True, then=Value(None)), default=F("plan__queue")))
    .values("queue_unless_suspended")[:1]
)
#: For a job that forbids overlapping runs, one of its runs still queued or running (or
#: None); inside CASE, PostgreSQL probes the partial index exec_job_unfinished for those
#: jobs only.
_UNFINISHED_RUN = Case(
    When(job__overlap_policy=FORBID, then=Subquery(
        Execution.objects.filter(
            job_id=OuterRef("job_id"), status__in=[Execution.Status.QUEUED, Execution.Status.RUNNING]
        ).order_by().values("id")[:1]
    )),
    default=None,
)


#: The windows and blackouts come as jsonb's text: the common "[]" costs no JSON decoding
#: a job (apps.jobs.windowing reads the text as it reads the values).
_AS_TEXT = {f"{name}_text": Cast(f"job__{name}", TextField()) for name in ("windows", "blackouts")}
#: CLAIM_FIELDS as a JobDue queryset names them: the due time is the narrow row's own, the
#: rest its job's.
_CLAIM_VALUES = [f"{name}_text" if f"{name}_text" in _AS_TEXT else
                 {"id": "job_id", "next_run_at": "next_run_at"}.get(name, f"job__{name}") for name in CLAIM_FIELDS]


def claim_due(now, batch_size, overloaded=frozenset()):
    """Run one claim transaction. Returns a TickResult whose ``to_publish`` lists the
    executions to publish once this function has returned (the transaction committed).
    ``overloaded``: the base queues whose low-priority runs are held (overload.py)."""
    try:
        return _claim_due(now, batch_size, overloaded, careful=False)
    except IntegrityError as exc:
        if queries.sqlstate(exc) != queries.UNIQUE_VIOLATION:
            raise
    # An occurrence of the batch already has its row (e.g. the job's jitter was edited so
    # the same occurrence came due again): the whole transaction was undone; the claim
    # again, its insert skipping such rows (queries.ScheduledRunsInsert).
    log.info("an occurrence claimed was already recorded; claiming again, skipping it")
    return _claim_due(now, batch_size, overloaded, careful=True)


def _claim_due(now, batch_size, overloaded, *, careful):
    with transaction.atomic():
        # Only the narrow rows are locked: a job's row stays free for its edits, whose due
        # time waits for this claim (Job.write_due) or is skipped by it.
        due = (JobDue.objects.filter(next_run_at__isnull=False, next_run_at__lte=now)
               .order_by("next_run_at").select_for_update(skip_locked=True, of=("self",))[:batch_size])
        rows = _fetch(due)
        if not rows:
            return TickResult()
        return _process_batch([ClaimedJob._make(row) for row in rows], now, overloaded, careful=careful)


#: What a claimed job's row is read as: its claim fields and what the tick needs besides.
#: A disabled job has no due time (apps.jobs.queries' trigger); ``enabled`` is checked again.
_CLAIMED = (JobDue.objects.order_by().filter(job__enabled=True)
            .annotate(org_queue=_ORG_QUEUE, unfinished_run=_UNFINISHED_RUN, **_AS_TEXT)
            .values_list(*_CLAIM_VALUES, "org_queue", "unfinished_run"))


def _fetch(due):
    """The claimed jobs as tuples of _CLAIMED's values: ``due``, the queryset that locks them,
    read through _CLAIMED.

    On PostgreSQL the jobs' due rows are locked first and the jobs' columns and subqueries (the
    organization's state, an unfinished run) read for the locked ones only: the SQL is
    ``SELECT <_CLAIMED's values> FROM (<due's SQL>) AS jobs_jobdue JOIN jobs_job ...``.
    Subqueries in the locking query itself would run for every row it reads, also the rows
    another scheduler holds, which SKIP LOCKED then passes over: with two schedulers, ~500
    such rows a tick (bench/README.md, "Figures behind the code"). And after the transaction's settings (_begin_claim), the SQL runs on a binary
    cursor: psycopg decodes timestamps and uuids in C, where Django's loader for timestamps is
    Python."""
    if not on_postgresql():
        return list(_CLAIMED.filter(pk__in=due.values("pk")))
    select, joined, select_params = _claimed_select()
    lock_sql, lock_params = due.query.sql_with_params()
    _begin_claim()
    # A lost session (PostgreSQL restarted, or the claim's idle timeout ended it while this
    # process was paused) raises Django's OperationalError there, which the loop backs off
    # from, instead of psycopg's error ending the process.
    return queries.fetch_binary(f'{select} FROM ({lock_sql}) AS "{JobDue._meta.db_table}" {joined}',
                                (*select_params, *lock_params))


@functools.cache
def _claimed_select():
    """_CLAIMED's SQL split around its first table (the narrow rows, which the locking
    query's result stands in for) and its parameters (constants): compiled once."""
    sql, params = _CLAIMED.query.sql_with_params()
    head, table, rest = sql.partition(f' FROM "{JobDue._meta.db_table}" ')
    if not table or "%s" in rest or not rest.startswith("INNER JOIN"):  # parameters only before FROM
        raise AssertionError(f"unexpected SQL for the claimed jobs: {sql}")
    return head, rest, tuple(params)


def _begin_claim():
    queries.begin_claim(CLAIM_IDLE_TIMEOUT_MS)


def _process_batch(jobs, now, overloaded=frozenset(), scans=None, *, careful):
    """``scans``: the due scans of this batch (see _due_scan), by default a new memo;
    ``careful``: see _write."""
    result = TickResult(claimed=len(jobs))
    rows, due_at, updates = _batch_rows(jobs, now, overloaded, scans)
    result.expired = sum(1 for _, _, expired_at in updates if expired_at is not None)
    ids = _uuid7s(len(rows), now)
    # An occurrence that already has its row (e.g. the job's jitter was edited so the
    # same occurrence came due again) is not inserted, counted or published again.
    inserted = _write(ids, rows, now, updates, careful=careful)
    for execution_id, row, due in zip(ids, rows, due_at):
        if inserted is not None and execution_id not in inserted:
            continue
        if row.status == QUEUED:
            result.created += 1
            if row.published_at is None:
                result.deferred += 1
            else:
                result.to_publish.append((execution_id, row.queue, due))
        else:
            result.skipped += 1
    return result


def _batch_rows(jobs, now, overloaded=frozenset(), scans=None):
    """The batch's rows to insert, each queued row's due time (None for the others) and each
    job's update (id, next due time, expired at).

    Most jobs of a burst differ only in who they are: same schedule, due time, policies,
    windows, organization state and queue. Their outcome (the rows but for the job's id,
    organization and version, and the next due time) is computed for the first of them and
    given to the others (``outcomes``): what _occurrences_for reads of a job, apart from
    those three, is its _outcome_key."""
    rows, due_at, updates = [], [], []
    scans = {} if scans is None else scans
    outcomes = {}
    for job in jobs:
        key = _outcome_key(job)
        outcome = outcomes.get(key) if key is not None else None
        if outcome is None:
            job_rows, new_next = _occurrences_for(job, now, overloaded, scans)
            # (a job still due after this tick, past MAX_DUE_SCAN missed occurrences, is not
            # shared: each such job logs its own note)
            if key is not None and (new_next is None or new_next > now):
                outcomes[key] = ([row[_OWN:] for row in job_rows], new_next)
        else:
            tails, new_next = outcome
            own = (job.id, job.organization_id, job.version)
            job_rows = [_Row._make(own + tail) for tail in tails]
        jitter = job_jitter(job)
        for row in job_rows:
            rows.append(row)
            due_at.append(due_after(row.scheduled_for, jitter) if row.status == QUEUED else None)
        updates.append((job.id, new_next, now if new_next is None else None))
    return rows, due_at, updates


#: A _Row starts with its job's own fields (id, organization, version); the rest is the outcome.
_OWN = 3
#: The claim fields an outcome does not depend on: who the job is (its id, organization and
#: version go into its rows as they are), ``created_at`` (an interval schedule's anchor only
#: when it has no ``start_at``: then it joins the key) and ``unfinished_run`` (only whether
#: there is one). Every other claimed field is part of the key, so a field added to the
#: claim (and read by _occurrences_for) is in it too.
_NOT_KEYED = {"id", "organization_id", "version", "created_at", "unfinished_run"}
_KEYED = operator.itemgetter(*[index for index, name in enumerate(ClaimedJob._fields) if name not in _NOT_KEYED])
_INTERVAL = Job.ScheduleType.INTERVAL.value


def _outcome_key(job):
    """What _occurrences_for's outcome depends on besides who the job is, or None when it
    depends on the job's id too (its jitter is derived from the id: not shared)."""
    if job.jitter_seconds:
        return None
    anchor = job.created_at if job.schedule_type == _INTERVAL and job.start_at is None else None
    return _KEYED(job), anchor, job.unfinished_run is not None


def _occurrences_for(job, now, overloaded=frozenset(), scans=None):
    """Rows to insert for one claimed job, and its next due time (None: no more).
    ``scans``: a memo of due scans shared by the jobs of one batch (None: none)."""
    schedule = job_schedule(job)
    due, following, more = _due_occurrences(job, schedule, now, scans)
    if job.org_queue is None:
        # A suspended tenant's jobs stop firing; they resume at their next occurrence.
        # (Past MAX_DUE_SCAN missed ones, ``following`` is still due: the next tick goes on.)
        return [], due_time(following, job)
    if (len(due) == 1 and not more and job.misfire_policy in (RUN_ONCE, RUN_ALL)
            and now - due[0] <= timedelta(seconds=job.misfire_grace_seconds)):
        # The common case, one occurrence within the grace window: both policies run it
        # (what plan_catch_up says too; ``skip`` has an on-time rule of its own).
        runs, skips = due, ()
    else:
        plan = plan_catch_up(
            due, now=now, policy=job.misfire_policy, grace_seconds=job.misfire_grace_seconds,
            on_time_seconds=settings.MISFIRE_ON_TIME_SECONDS, more=more,
        )
        runs, skips = plan.run, plan.skip
    runs, outside, deferred, following = apply_windows(job, schedule, runs, following)
    queue = queue_for(job.org_queue, job.region, job.priority)
    held = job.priority == LOW and queue_for(job.org_queue, job.region) in overloaded
    rows = [_skipped(job, at, reason, now) for at, reason in [*skips, *outside]]
    for index, at in enumerate(runs):
        if job.overlap_policy == FORBID and (job.unfinished_run is not None or index > 0):
            rows.append(_skipped(job, at, "overlap", now))
        elif held:
            rows.append(_queued(job, at, queue, now)._replace(published_at=None, defer_reason=OVERLOAD))
        else:
            rows.append(_queued(job, at, queue, now))
    rows.extend(_deferred_to_opening(job, placed, queue, now) for placed in deferred)
    return rows, due_time(following, job)


def _deferred_to_opening(job, placed, queue, now):
    """A run moved out of a closed window to its next opening: due then (plus the job's
    jitter), published by the scheduler's due_retries round when that time comes."""
    return _queued(job, placed.at, queue, now)._replace(
        published_at=None, next_attempt_at=due_time(placed.at, job), deferred_from=placed.occurrence,
        defer_reason=placed.reason)


def _due_occurrences(job, schedule, now, scans=None):
    """The occurrences due at ``now``, oldest first, at most MAX_DUE_SCAN of them; the
    occurrence after the last of them (None: the schedule has ended); and whether that
    one is due too (``more``: the next tick records it and what follows).

    ``scans`` memoises the scan within a batch: jobs of one schedule (expression and
    timezone, interval and anchor, ...), start and end, jitter and due time, the many jobs of
    a burst that share a cron line, get the answer computed for the first of them."""
    key = (schedule, job.start_at, job.end_at, job.next_run_at, job_jitter(job))
    scan = None if scans is None else scans.get(key)
    if scan is None:
        scan = _due_scan(*key, now)
        if scans is not None:
            scans[key] = scan
    if scan[2]:
        log.info("job %s: more than %d occurrences due; the rest are recorded next tick", job.id, MAX_DUE_SCAN)
    return scan


def _due_scan(schedule, start_at, end_at, next_run_at, jitter, now):
    """_due_occurrences of a job of that schedule, start and end, due time and jitter (a pure
    function of them): (due occurrences as a tuple, the following one, more)."""
    due = [occurrence_before(next_run_at, jitter)]
    while True:
        following = next_run(schedule, due[-1], start_at=start_at, end_at=end_at)
        if following is None or due_after(following, jitter) > now:  # not due yet
            return tuple(due), following, False
        if len(due) >= MAX_DUE_SCAN:
            return tuple(due), following, True
        due.append(following)


def _queued(job, at, queue, now):
    return _Row(job.id, job.organization_id, job.version, at, QUEUED, "", queue, now, None,
                jitter_seconds=int(job_jitter(job).total_seconds()))


def _skipped(job, at, reason, now):
    return _Row(job.id, job.organization_id, job.version, at, SKIPPED, reason, "", None, now)


def _uuid7s(count, now):
    """``count`` new execution ids: UUIDv7 laid out as cronsvc.ids.uuid7 makes them (48-bit
    millisecond time, version 7, variant 0b10, 74 random bits), with one read of the
    OS's random source for the batch instead of two per id. Their time is ``now`` (the
    database's): ids order by creation whatever this process's clock says."""
    millis = int(now.timestamp() * 1000) & ((1 << 48) - 1)
    head = millis << 80 | 0x7 << 76 | 0b10 << 62
    random_bytes = os.urandom(10 * count)
    ids = []
    for start in range(0, 10 * count, 10):
        # 80 random bits a id: rand_a from the first two bytes' low 12 bits, rand_b from the
        # last eight's low 62. The UUID is made as its own __init__ makes one (it sets its
        # two slots with object.__setattr__), without the argument checks: half the cost.
        value = _new(uuid.UUID)
        _set(value, "int", head | int.from_bytes(random_bytes[start:start + 10], "big") & _RANDOM_BITS)
        _set(value, "is_safe", _UNKNOWN_SAFETY)
        ids.append(value)
    return ids


_RANDOM_BITS = 0xFFF << 64 | ((1 << 62) - 1)  # rand_a's 12 bits, rand_b's 62
_new, _set = object.__new__, object.__setattr__
#: Read once: an enum member read through its class costs a descriptor call, a visible share
#: of a tick's Python when read once an id (bench/README.md, "Figures behind the code").
_UNKNOWN_SAFETY = uuid.SafeUUID.unknown


def _write(ids, rows, now, updates, *, careful):
    """Insert the rows (trigger ``schedule``, created at ``now``) and write every claimed
    job's next due time (``updates``). ``careful``: occurrences that already have a row are
    skipped; otherwise (PostgreSQL) one of them raises IntegrityError, a unique violation.
    Returns the set of ids inserted, or None for "all of them" (also on SQLite, which does
    not say)."""
    if not on_postgresql():
        _insert_by_orm(ids, rows, now)
        _advance_by_orm(updates)
        return None
    # one statement for every claimed job: its runs inserted, the job advanced
    inserted = queries.ScheduledRunsInsert.get(_Row._fields).run(ids, rows, now, updates, careful=careful)
    return None if len(inserted) == len(rows) else inserted


# SQLite (embedded mode) runs one scheduler with small batches: the ORM, a row at a time
# where it must, is fine.

def _insert_by_orm(ids, rows, now):
    if not rows:
        return
    Execution.objects.bulk_create(
        [Execution(id=execution_id, trigger=SCHEDULE, created_at=now, **row._asdict())
         for execution_id, row in zip(ids, rows)],
        batch_size=1000, ignore_conflicts=True,
    )
    if outbox.enabled():  # SQLite does not say which were inserted: look
        events.changed(Execution.objects.filter(id__in=ids).select_related("job"), lambda e: e.status, "", now,
                       reason=lambda e: e.skip_reason)


def _advance_by_orm(updates):
    for job_id, next_at, expired_at in updates:
        JobDue.objects.filter(job_id=job_id).update(next_run_at=next_at)
        if expired_at is not None:
            Job.objects.filter(id=job_id).update(expired_at=expired_at)
