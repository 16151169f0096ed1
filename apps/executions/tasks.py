from celery import shared_task

from .delivery import run_batch
from .publishing import RUN_TASK


@shared_task(name=RUN_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_executions(execution_ids):
    """Run a chunk of executions published by the scheduler, the sweeper or a trigger."""
    run_batch(execution_ids)
