"""Which Celery queue a run goes to: its plan's queue, per region when the job names one.

Bulkheads: each plan tier has its own queue and its own workers, so a flood of free-tier
runs never delays a paid tenant; ``runs.<plan>.<region>`` lets self-hosters place
workers near their targets.
"""

from django.conf import settings

DEFAULT_QUEUE = "default"


def queue_for(plan_queue, region=""):
    if region and region in settings.REGIONS:
        return f"{plan_queue}.{region}"
    return plan_queue


def all_run_queues(plan_queues):
    """Every queue a worker fleet should consume for these plans (for docs and tests)."""
    queues = []
    for plan_queue in plan_queues:
        queues.append(plan_queue)
        queues.extend(f"{plan_queue}.{region}" for region in settings.REGIONS)
    return queues
