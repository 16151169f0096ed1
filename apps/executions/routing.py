"""Which Celery queue a run goes to: its plan's queue, per region when the job names one,
and per priority.

Bulkheads: each plan tier has its own queue and its own workers, so a flood of free-tier
runs never delays a paid tenant; ``runs.<plan>.<region>`` lets self-hosters place
workers near their targets. Within a plan's queue, high- and low-priority runs go to
sub-queues ``<queue>--high`` and ``<queue>--low`` (normal ones stay on ``<queue>``); the
plan's workers consume ``<queue>--high,<queue>,<queue>--low`` in that order (Procfile; on
Redis with kombu's ``queue_order_strategy='priority'``), so a backlog of low runs never
stands in front of a high one. See docs/run-control.md.
"""

from django.conf import settings

DEFAULT_QUEUE = "default"
HIGH, NORMAL, LOW = "high", "normal", "low"
PRIORITY_ORDER = (HIGH, NORMAL, LOW)
_SEPARATOR = "--"  # not a dot (a region may be named like a priority), not ":" (the filesystem broker refuses it)


def queue_for(plan_queue, region="", priority=NORMAL):
    queue = f"{plan_queue}.{region}" if region and region in settings.REGIONS else plan_queue
    return queue if priority == NORMAL or not priority else f"{queue}{_SEPARATOR}{priority}"


def base_queue(queue):
    """The plan (and region) queue a priority sub-queue belongs to."""
    return queue.partition(_SEPARATOR)[0]


def priority_of(queue):
    """The priority a queue's runs have (its sub-queue's suffix)."""
    return queue.partition(_SEPARATOR)[2] or NORMAL


def priority_queues(queue):
    """A plan queue's sub-queues in the order workers consume them."""
    return [queue_for(queue, priority=priority) for priority in PRIORITY_ORDER]


def all_run_queues(plan_queues):
    """Every queue a worker fleet should consume for these plans (for docs and tests)."""
    queues = []
    for plan_queue in plan_queues:
        for queue in [plan_queue, *(f"{plan_queue}.{region}" for region in settings.REGIONS)]:
            queues.extend(priority_queues(queue))
    return queues
