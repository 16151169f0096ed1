"""The outcome hook: alerts and outgoing events, decided in the recording transaction.

Most jobs have no channel and no subscription: for them the hook costs one query per
group of outcomes (which of these jobs belong to a project that listens, or, when mail is
configured, failed or have a notified failure open?) and nothing else. A job whose project
has no channel has its failure alert e-mailed to the organization's owners, with the same
one-alert-per-episode rule. For the others it locks the jobs' alert-state rows (sorted, like the recording's
job update, so two groups cannot deadlock), decides with ``cronsvc.notify.decide`` and
writes Notification and OutboxEvent rows that are sent after commit.
"""

from __future__ import annotations

from collections import defaultdict

from django.utils import timezone

from cronsvc.notify import decide as logic
from cronsvc.notify.formats import event_type_for, execution_event
from cronsvc.statuses import FAILED, RAN

from .dispatch import mail_configured, owner_addresses, queue_events, queue_notifications
from .evidence import build_alert
from .models import AlertState, Channel, EventSubscription, Notification, OutboxEvent
from .queries import listening_job_ids
from .rules import rules_for

AUTO_DISABLED_PREFIX = "Disabled automatically"
#: The alert the owners are e-mailed about when a job's project has no channel.
OWNERS_HEAR = "failure"


def on_run_outcomes(outcomes):
    final = [o for o in outcomes if o.moved and o.status in RAN]
    if not final:
        return
    # Without a channel the owners hear a job's failures by e-mail, when mail is configured.
    failing = {o.job_id for o in final if o.status in FAILED} if mail_configured() else None
    jobs = listened_jobs({o.job_id for o in final}, failing=failing)
    if not jobs:
        return
    now = timezone.now()
    runs = defaultdict(list)
    for outcome in final:
        if outcome.job_id in jobs:
            runs[outcome.job_id].append(outcome)
    project_ids = {job.project_id for job in jobs.values()}
    channels = _by_project(Channel.objects.filter(project_id__in=project_ids, enabled=True))
    subscriptions = _by_project(EventSubscription.objects.filter(project_id__in=project_ids, enabled=True))
    alerts, disabled = _decide(jobs, runs, now)
    _queue_alerts(alerts, channels)
    _queue_events(jobs, runs, disabled, subscriptions, now)


def listened_jobs(job_ids, failing=None):
    """{job_id: Job} of those jobs whose project has an enabled channel or subscription
    (with ``failing``: also the jobs whose owners hear their failures, queries.py)."""
    from apps.jobs.models import Job

    listened = listening_job_ids(job_ids, failing)
    if not listened:
        return {}
    return {job.id: job for job in Job.objects.filter(id__in=listened).select_related("project")}


def _by_project(queryset):
    grouped = defaultdict(list)
    for row in queryset:
        grouped[row.project_id].append(row)
    return grouped


def lock_states(job_ids):
    """{job_id: AlertState}, created if missing and locked until the transaction ends."""
    job_ids = sorted(job_ids)
    AlertState.objects.bulk_create([AlertState(job_id=job_id) for job_id in job_ids], ignore_conflicts=True)
    return {state.job_id: state for state in
            AlertState.objects.select_for_update().filter(job_id__in=job_ids).order_by("job_id")}


def flags_of(state):
    return logic.AlertFlags(failure_notified=state.failure_notified, disabled_notified=state.disabled_notified,
                            notified_at=state.notified_at, last_reminder_at=state.last_reminder_at)


def store_flags(state, flags):
    changed = flags != flags_of(state)
    for name in ("failure_notified", "disabled_notified", "notified_at", "last_reminder_at"):
        setattr(state, name, getattr(flags, name))
    return changed


def _decide(jobs, runs, now):
    """[(event, job, execution_id)] to alert about, and the jobs just auto-disabled."""
    rules = rules_for(jobs.values())
    states = lock_states(runs)
    alerts, disabled, changed = [], [], []
    for job_id, job_runs in runs.items():
        job, rule = jobs[job_id], rules[job_id]
        health = logic.JobHealth(consecutive_failures=job.consecutive_failures, enabled=job.enabled,
                                 auto_disabled=job.disabled_reason.startswith(AUTO_DISABLED_PREFIX))
        core_rule = logic.Rule(rule.failure_threshold, rule.notify_recovery, rule.notify_disabled)
        flags, events = logic.decide(flags_of(states[job_id]), [o.status for o in job_runs], health,
                                     core_rule, now)
        if store_flags(states[job_id], flags):
            changed.append(states[job_id])
        for event, index in events:
            if event == "disabled":
                disabled.append((job, job_runs[index]))
            if not logic.muted(event, core_rule):
                alerts.append((event, job, job_runs[index].execution_id))
    _save_states(changed)
    return alerts, disabled


def _save_states(states):
    """One UPDATE per distinct set of flags (a group's jobs mostly move the same way);
    bulk_update's CASE per row costs far more for hundreds of rows."""
    fields = ("failure_notified", "disabled_notified", "notified_at", "last_reminder_at")
    groups = defaultdict(list)
    for state in states:
        groups[tuple(getattr(state, name) for name in fields)].append(state.job_id)
    for values, job_ids in groups.items():
        AlertState.objects.filter(job_id__in=job_ids).update(**dict(zip(fields, values)))


def _queue_alerts(alerts, channels):
    from apps.executions.models import Execution

    wanted = [(event, job, execution_id) for event, job, execution_id in alerts
              if any(channel.accepts(event) for channel in channels.get(job.project_id, ()))
              or (event == OWNERS_HEAR and not channels.get(job.project_id) and mail_configured())]
    if not wanted:
        return
    executions = Execution.objects.in_bulk([execution_id for _, _, execution_id in wanted])
    rows = []
    for event, job, execution_id in wanted:
        execution = executions.get(execution_id)
        if channels.get(job.project_id):
            rows += alert_rows(event, job, execution, channels[job.project_id])
        else:
            rows += owner_alert_rows(event, job, execution)
    queue_notifications(rows)


def alert_rows(event, job, execution, channels, *, detail=""):
    """Unsaved Notification rows: one per channel of the job's project that wants ``event``."""
    subject, text, data = build_alert(event, job, execution, detail=detail)
    return [
        Notification(organization_id=job.organization_id, project_id=job.project_id, channel=channel,
                     channel_name=channel.name, event=event, job=job,
                     execution_id=execution.id if execution else None, subject=subject, text=text, data=data)
        for channel in channels if channel.accepts(event)
    ]


def owner_alert_rows(event, job, execution):
    """An unsaved Notification e-mailing the organization's owners (none without owners):
    the alert of a job whose project has no channel. Sent within the owners' mail
    throttle (sending.py)."""
    owners = owner_addresses(job.organization_id)
    if not owners:
        return []
    subject, text, data = build_alert(event, job, execution)
    text += ("\n\nThis project has no notification channel: only the organization's owners hear about its "
             "failures, by e-mail. Add a channel under Notifications.")
    return [Notification(organization_id=job.organization_id, project_id=job.project_id, recipients=owners,
                         event=event, job=job, execution_id=execution.id if execution else None, subject=subject,
                         text=text, data=data)]


def _queue_events(jobs, runs, disabled, subscriptions, now):
    rows = []
    for job_id, job_runs in runs.items():
        job = jobs[job_id]
        for outcome in job_runs:
            rows += _event_rows(job, subscriptions, event_type_for(outcome.status), outcome)
    for job, outcome in disabled:
        rows += _event_rows(job, subscriptions, "job.disabled", outcome)
    queue_events(rows)


def _event_rows(job, subscriptions, event_type, outcome):
    listeners = [s for s in subscriptions.get(job.project_id, ()) if event_type and s.accepts(event_type)]
    if not listeners:
        return []
    payload = execution_event(
        type=event_type, timestamp=outcome.finished_at.isoformat(), job_id=str(job.id),
        project=str(job.project_id), execution_id=str(outcome.execution_id), status=outcome.status,
        duration_ms=outcome.duration_ms, error_kind=outcome.error_kind, error_message=outcome.error_message,
    )
    return [OutboxEvent(organization_id=job.organization_id, subscription=subscription, type=event_type,
                        execution_id=outcome.execution_id, payload=payload) for subscription in listeners]
