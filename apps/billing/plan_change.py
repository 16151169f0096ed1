"""What a plan change does to an organization's jobs and runs.

A downgrade never deletes: each enabled job the new plan does not allow is paused with a
reason naming the limits (``paused_reason`` starts with PAUSE_PREFIX), and the paused jobs
are returned so the caller can list them. Jobs beyond the new plan's max_jobs are paused
newest first. An upgrade (or an operator's edit) that makes such a job fit again resumes it;
a customer may also resume it once it fits.

The queue: the scheduler reads the plan's queue when it creates each run, so new runs go
to the new queue at once; runs created but not yet handed to the broker (retries waiting
for their time, deferred runs) are moved here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from apps.executions.models import Execution
from apps.executions.routing import queue_for
from apps.jobs.models import Job
from apps.jobs.services import pause_job, resume_job
from apps.jobs.validation import plan_violations

PAUSE_PREFIX = "Plan limit"


@dataclass
class PlanChange:
    paused: list = field(default_factory=list)  # [(job, [limit names])]
    resumed: list = field(default_factory=list)
    requeued: int = 0


@transaction.atomic
def apply_plan(organization, plan, *, now=None):
    """Bring the organization's jobs and waiting runs in line with ``plan`` (already set)."""
    now = now or timezone.now()
    result = PlanChange()
    _pause_over_limits(organization, plan, now, result)
    _resume_fitting(organization, plan, now, result)
    result.requeued = _move_waiting_runs(organization, plan)
    return result


def paused_by_plan(organization):
    """The organization's jobs a plan change paused (for the usage page and API)."""
    return Job.objects.for_organization(organization).filter(enabled=False, paused_reason__startswith=PAUSE_PREFIX)


def _pause_over_limits(organization, plan, now, result):
    jobs = list(Job.objects.for_organization(organization).order_by("created_at", "id"))
    keep = plan.max_jobs
    for job in jobs:
        if not job.enabled:
            continue
        limits = [violation.limit for violation in plan_violations(job, plan, now)]
        if not limits:
            keep -= 1
            if keep >= 0:
                continue
            limits = ["max_jobs"]
        pause_job(job, reason=f"{PAUSE_PREFIX} on the {plan.name} plan: {', '.join(limits)}"[:200])
        result.paused.append((job, limits))


def _resume_fitting(organization, plan, now, result):
    enabled = Job.objects.for_organization(organization).filter(enabled=True).count()
    paused_now = {job.pk for job, _ in result.paused}
    for job in paused_by_plan(organization).order_by("created_at", "id"):
        if job.pk in paused_now or enabled >= plan.max_jobs or plan_violations(job, plan, now):
            continue
        resume_job(job, now=now, plan=plan)
        enabled += 1
        result.resumed.append(job)


def _move_waiting_runs(organization, plan):
    waiting = Execution.objects.filter(organization=organization, status=Execution.Status.QUEUED,
                                       published_at__isnull=True)
    moved = 0
    # by region and priority: each run keeps its sub-queue (apps.executions.routing)
    kinds = Job.objects.for_organization(organization).values_list("region", "priority").distinct()
    for region, priority in set(kinds):
        moved += waiting.filter(job__region=region, job__priority=priority).update(
            queue=queue_for(plan.queue, region, priority))
    return moved
