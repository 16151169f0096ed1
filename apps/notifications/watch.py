"""The periodic watch (django-celery-beat, every minute): late runs, long-running runs,
reminders while a job keeps failing, and sending rows that are due (retries, and rows
whose after-commit hand-off was lost).

Only jobs whose project has a channel are looked at; late/long-running scans go through
the executions' (job, scheduled_for) and unfinished-runs indexes. Late runs alert once per
job and episode (a run started in time ends it); each long run once (``RunAlert`` is
unique on execution and kind). Lateness leaves out the run's jitter
(apps/executions/lateness.py).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from cronsvc.notify.decide import reminder_due
from cronsvc.statuses import FAILED

from . import queries, sending
from .alerts import alert_rows, flags_of, listened_jobs, lock_states
from .dispatch import _enqueue, queue_notifications
from .models import AlertState, Channel, Notification, NotificationRule, OutboxEvent
from .rules import rules_for

# Late runs are looked for among runs scheduled this far back at most.
LATE_LOOKBACK = timedelta(hours=6)


def watch_once(now=None):
    now = now or timezone.now()
    with transaction.atomic():
        late_and_long(now)
    with transaction.atomic():
        reminders(now)
    resend_due(now)


def _jobs_watching_runs():
    """{job_id: Job} with a late or long-running threshold in their effective rule."""
    from apps.jobs.models import Job

    rules = NotificationRule.objects.filter(Q(late_after_seconds__isnull=False) | Q(long_running_seconds__isnull=False))
    scopes = list(rules.values_list("project_id", "job_id"))
    if not scopes:
        return {}, {}
    job_ids = {job_id for _, job_id in scopes if job_id}
    project_ids = {project_id for project_id, job_id in scopes if not job_id}
    candidates = Job.objects.filter(Q(id__in=job_ids) | Q(project_id__in=project_ids)).values_list("id", flat=True)
    jobs = listened_jobs(set(candidates))
    return jobs, rules_for(jobs.values())


def late_and_long(now):
    jobs, rules = _jobs_watching_runs()
    found = _late_runs(jobs, rules, now) + _long_runs(rules, now)
    channels = _channels({jobs[run.job_id].project_id for _, run, _ in found})
    rows = []
    for kind, run, detail in found:
        job = jobs[run.job_id]
        rows += alert_rows(kind, job, run, channels.get(job.project_id, ()), detail=detail)
    queue_notifications(rows)
    return rows


def _late_runs(jobs, rules, now):
    """[("late", run, detail)]: one alert per job and episode of lateness. Each of a job's
    scheduled runs is judged once, in order (``AlertState.late_checked_until``), and only
    those scheduled after the rule was set (``late_since``) and within LATE_LOOKBACK: a late
    run opens an episode (alerted), a run started in time closes it."""
    from apps.executions.lateness import with_first_start
    from apps.executions.models import Execution

    watched = {job_id: rule for job_id, rule in rules.items() if rule.late_after_seconds}
    if not watched:
        return []
    states = lock_states(watched)
    since = {job_id: max(moment for moment in (states[job_id].late_checked_until, rule.late_since,
                                               now - LATE_LOOKBACK) if moment is not None)
             for job_id, rule in watched.items()}
    runs = defaultdict(list)
    for run in with_first_start(Execution.objects.filter(
            job_id__in=list(watched), trigger="schedule", scheduled_for__gt=min(since.values()),
            scheduled_for__lte=now).order_by("job_id", "scheduled_for")):
        if run.scheduled_for > since[run.job_id]:
            runs[run.job_id].append(run)
    found = []
    for job_id, job_runs in runs.items():
        state, limit = states[job_id], watched[job_id].late_after_seconds
        for run in job_runs:
            late = late_verdict(run, limit, now)
            if late is UNDECIDED:
                break  # judged on a later pass, with the runs after it
            state.late_checked_until = run.scheduled_for
            if late is None:
                continue
            if late and not state.late_open:
                found.append(("late", run, late))
            state.late_open = bool(late)
        state.save(update_fields=["late_open", "late_checked_until"])
    return found


UNDECIDED = object()


def late_verdict(run, limit_seconds, now):
    """A run (annotated with its first start) judged against a late limit: the alert's text
    when it is late, "" when it started in time, None when it never started (skipped,
    cancelled) and UNDECIDED while it may still start in time."""
    from apps.executions.lateness import due_at

    due, limit = due_at(run), timedelta(seconds=limit_seconds)
    if run.first_started_at is not None:
        late = run.first_started_at - due
        return (f"Started {int(late.total_seconds())} s after it was due (limit {limit_seconds} s)."
                if late > limit else "")
    if run.status not in ("queued", "running"):
        return None
    if now - due > limit:
        return f"Not started {int((now - due).total_seconds())} s after it was due (limit {limit_seconds} s)."
    return UNDECIDED


def _long_runs(rules, now):
    """[("long_running", run, detail)] for runs past the limit, once per run (RunAlert)."""
    from apps.executions.models import Execution

    by_long = defaultdict(list)
    for job_id, rule in rules.items():
        if rule.long_running_seconds:
            by_long[rule.long_running_seconds].append(job_id)
    found = []
    for seconds, job_ids in by_long.items():
        runs = Execution.objects.filter(job_id__in=job_ids, status="running",
                                        started_at__lt=now - timedelta(seconds=seconds))
        for run in runs:
            found.append(("long_running", run, f"Running for {int((now - run.started_at).total_seconds())} s "
                                               f"(limit {seconds} s)."))
    fresh = queries.mark_run_alerts({(kind, run.id) for kind, run, _ in found})
    return [(kind, run, detail) for kind, run, detail in found if (kind, run.id) in fresh]


def _channels(project_ids):
    grouped = defaultdict(list)
    for channel in Channel.objects.filter(project_id__in=project_ids, enabled=True):
        grouped[channel.project_id].append(channel)
    return grouped


def reminders(now):
    """A reminder every H hours while a notified failure stays open."""
    from apps.executions.models import Execution

    open_ids = list(AlertState.objects.filter(failure_notified=True).values_list("job_id", flat=True))
    jobs = listened_jobs(set(open_ids))
    rules = rules_for(jobs.values())
    due = [job_id for job_id, rule in rules.items() if rule.reminder_hours]
    if not due:
        return []
    states = AlertState.objects.select_for_update(skip_locked=True).filter(job_id__in=due, failure_notified=True)
    channels = _channels({job.project_id for job in jobs.values()})
    rows = []
    for state in states:
        job = jobs[state.job_id]
        if not reminder_due(flags_of(state), rules[job.id].reminder_hours, now):
            continue
        state.last_reminder_at = now
        state.save(update_fields=["last_reminder_at"])
        last = (Execution.objects.filter(job_id=job.id, status__in=FAILED)
                .order_by("-scheduled_for").first())
        since = state.notified_at.isoformat() if state.notified_at else "?"
        rows += alert_rows("reminder", job, last, channels.get(job.project_id, ()),
                           detail=f"Failing since {since} ({job.consecutive_failures} consecutive failed runs).")
    queue_notifications(rows)
    return rows


def resend_due(now):
    """Hand due rows to the sending task (retries, lost hand-offs)."""
    for model, task in ((Notification, "send_notifications"), (OutboxEvent, "send_events")):
        ids = sending.due_ids(model, now)
        if ids:
            _enqueue(f"apps.notifications.tasks.{task}", ids)
