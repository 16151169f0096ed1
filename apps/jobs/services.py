"""Changing a job's running state: pause, resume."""

from django.db import transaction
from django.utils import timezone

from .models import Job
from .scheduling import due_time, next_occurrence


@transaction.atomic
def pause_job(job, *, reason=""):
    Job.objects.filter(pk=job.pk).update(enabled=False, paused_reason=reason, updated_at=timezone.now())
    job.enabled, job.paused_reason = False, reason


@transaction.atomic
def resume_job(job, *, now=None, plan=None):
    """Resume from now: occurrences missed while paused are not caught up. Raises
    PlanLimit when the job no longer fits its organization's plan (e.g. paused by a
    downgrade): it resumes after an upgrade or an edit that brings it within the plan."""
    from .validation import check_resumable

    now = now or timezone.now()
    check_resumable(job, plan or job.organization.plan, now)
    job.enabled = True
    job.paused_reason = ""
    job.disabled_reason = ""
    job.consecutive_failures = 0
    job.next_run_at = due_time(next_occurrence(job, now), job)
    job.save(update_fields=["enabled", "paused_reason", "disabled_reason", "consecutive_failures",
                            "next_run_at", "updated_at"])


def reschedule(job, *, now):
    """Set ``next_run_at`` from the job's schedule after a create or a schedule change
    (the caller saves). A schedule with no run after ``now`` leaves the job expired."""
    occurrence = next_occurrence(job, now)
    job.next_run_at = due_time(occurrence, job)
    job.expired_at = None if occurrence is not None else now
    return job
