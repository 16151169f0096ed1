"""Creating, changing and deleting a job, and its running state (pause, resume).

A change asked for by a person or an API key commits with its audit event in one
transaction, or neither does: the API (apps.jobs.api) and the pages (apps.web.views.jobs)
both go through here and pass ``audit(action, target, data)`` (apps.api.audit.audit bound
to the request). Without ``audit`` (pause and resume by the system: plan changes, auto
disable) the change alone is made.
"""

from django.db import transaction
from django.utils import timezone

from apps.plans.limits import PlanLimit
from apps.sql.clock import database_now
from apps.projects import hooks

from .models import Job
from .scheduling import due_time, next_occurrence


def _no_audit(action, target=None, data=None):
    return None


@transaction.atomic
def create_job(serializer, *, audit, **data):
    """Save the new job of a validated JobSerializer; ``data`` goes into the audit event."""
    job = serializer.save()
    audit("job.create", job, {"name": job.name, **data})
    return job


@transaction.atomic
def update_job(serializer, *, audit, fields):
    """Save a validated JobSerializer's change to its job; ``fields`` names what was sent."""
    job = serializer.save()
    audit("job.update", job, {"fields": sorted(fields)})
    return job


@transaction.atomic
def delete_job(job, *, audit):
    """Delete the job now; its history goes after, in batches (apps.executions.purging)."""
    audit("job.delete", job, {"name": job.name})
    hooks.delete_jobs([job])


@transaction.atomic
def pause_job(job, *, reason="", audit=_no_audit):
    Job.objects.filter(pk=job.pk).update(enabled=False, paused_reason=reason, updated_at=timezone.now())
    job.enabled, job.paused_reason = False, reason
    audit("job.pause", job, None)


@transaction.atomic
def resume_job(job, *, now=None, plan=None, audit=_no_audit):
    """Resume from now: occurrences missed while paused are not caught up. Raises
    PlanLimit when the job no longer fits its organization's plan (e.g. paused by a
    downgrade): it resumes after an upgrade or an edit that brings it within the plan."""
    from .validation import check_resumable

    now = now or database_now()  # resumed from the database's time, not this process's
    check_resumable(job, plan or job.organization.plan, now)
    job.enabled = True
    job.paused_reason = ""
    job.disabled_reason = ""
    job.consecutive_failures = 0
    job.next_run_at = due_time(next_occurrence(job, now), job)
    job.save(update_fields=["enabled", "paused_reason", "disabled_reason", "consecutive_failures",
                            "next_run_at", "updated_at"])
    audit("job.resume", job, None)


def resume_paused_with(organization, reason, *, now=None):
    """Resume the organization's jobs paused with exactly ``reason`` (a cancelled deletion's:
    apps.accounts.hooks), each from ``now``; jobs paused for any other reason stay paused. A
    job that no longer fits the plan stays paused, saying why. Returns how many resumed."""
    now = now or database_now()
    resumed = 0
    for job in Job.objects.for_organization(organization).filter(enabled=False, paused_reason=reason):
        try:
            resume_job(job, now=now)
        except PlanLimit as exc:
            pause_job(job, reason=f"not resumed after the cancelled deletion: {exc.message}"[:200])
        else:
            resumed += 1
    return resumed


def reschedule(job, *, now):
    """Set ``next_run_at`` from the job's schedule after a create or a schedule change
    (the caller saves). A schedule with no run after ``now`` leaves the job expired."""
    occurrence = next_occurrence(job, now)
    job.next_run_at = due_time(occurrence, job)
    job.expired_at = None if occurrence is not None else now
    return job
