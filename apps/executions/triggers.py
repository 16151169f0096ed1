"""Starting a run outside the schedule: the one function the job views call."""

from django.db import transaction
from django.utils import timezone

from . import publishing
from .models import Execution
from .routing import queue_for


def trigger_now(job, *, now=None, trigger=Execution.Trigger.MANUAL, replay_of=None):
    """Create a queued execution for ``job`` and publish it once committed."""
    now = now or timezone.now()
    queue = queue_for(job.organization.plan.queue, job.region)
    execution = Execution.objects.create(
        job=job, organization_id=job.organization_id, scheduled_for=now, trigger=trigger,
        status=Execution.Status.QUEUED, queue=queue, created_at=now, published_at=now,
        replay_of=replay_of,
    )
    transaction.on_commit(lambda: publishing.publish({queue: [execution.id]}))
    return execution
