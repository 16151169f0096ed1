import gc

from celery import shared_task
from celery.signals import task_prerun, worker_process_init, worker_process_shutdown, worker_ready, worker_shutdown
from django.db import close_old_connections

from .delivery import run_batch, wait_for_late_runs
from .publishing import RUN_TASK

# At shutdown, how long runs handed to the late recorder may take to finish and be
# recorded (what is left is taken back by the sweeper when its lease ends).
LATE_RUNS_SHUTDOWN_WAIT = 20.0


@shared_task(name=RUN_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def run_executions(execution_ids):
    """Run a chunk of executions published by the scheduler, the sweeper or a trigger."""
    run_batch(execution_ids)


@task_prerun.connect
def _reuse_connections(**kwargs):
    """Worker threads keep their database connections from one task to the next, as
    Django's own request cycle does: only a broken one, or one older than CONN_MAX_AGE, is
    closed before a task (the next query opens a fresh one). Celery's Django fix-up would
    close them before and after every task — a new PostgreSQL connection per task —
    unless CELERY_DB_REUSE_MAX is set (config/settings.py)."""
    close_old_connections()


@worker_ready.connect
@worker_process_init.connect
def _freeze_startup_objects(**kwargs):
    """Move what start-up made (modules, classes, settings: ~100k objects that live as long
    as the process) out of the garbage collector's sight. Otherwise every full collection
    walks them all again, which cost a busy worker ~10 % of its CPU (bench_delivery.py)."""
    gc.collect()
    gc.freeze()


@worker_shutdown.connect
@worker_process_shutdown.connect
def _finish_late_runs(**kwargs):
    wait_for_late_runs(LATE_RUNS_SHUTDOWN_WAIT)

