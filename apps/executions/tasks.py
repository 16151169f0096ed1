import logging
import os
import signal
import threading
import time
import uuid

from celery import shared_task
from celery.signals import (task_postrun, task_prerun, worker_process_init, worker_process_shutdown, worker_ready,
                            worker_shutdown)
from django.db import close_old_connections

from cronsvc.gc_tuning import freeze_startup_objects

from . import purging
from .worker import deadletters, scripts
from .worker.batch import run_batch, wait_for_late_runs
from .scheduling.publishing import RUN_TASK

log = logging.getLogger(__name__)

# At shutdown, how long runs handed to the late recorder may take to finish and be
# recorded (what is left is taken back by the sweeper when its lease ends).
LATE_RUNS_SHUTDOWN_WAIT = 20.0


@shared_task(name=RUN_TASK, acks_late=True, reject_on_worker_lost=True, ignore_result=True, bind=True)
def run_executions(self, execution_ids):
    """Run a chunk of executions published by the scheduler, the sweeper or a trigger. A
    message whose argument is not a list of execution ids is dead-lettered
    (apps/executions/worker/deadletters.py): the runs it may have meant stay queued in the
    database for the sweeper."""
    if not _are_execution_ids(execution_ids):
        delivery = self.request.delivery_info or {}
        deadletters.record(delivery.get("routing_key", ""), "wrong arguments: not a list of execution ids",
                           {"task": RUN_TASK, "id": self.request.id, "args": self.request.args,
                            "kwargs": self.request.kwargs})
        return
    run_batch(execution_ids)


def _are_execution_ids(value):
    if not isinstance(value, list):
        return False
    try:
        for item in value:
            uuid.UUID(item)
    except (TypeError, ValueError, AttributeError):
        return False
    return True


@shared_task(name=purging.PURGE_DELETED_JOB_TASK, ignore_result=True)
def purge_deleted_job(job_id):
    """Delete a deleted job's executions in batches (apps.executions.purging)."""
    report = purging.purge_deleted_job(job_id)
    log.info("job %s deleted: %d executions purged in %d batches (longest %.2fs)",
             job_id, report.executions, report.batches, report.longest_batch_seconds)


@task_prerun.connect
def _reuse_connections(**kwargs):
    """Worker threads keep their database connections from one task to the next, as
    Django's own request cycle does: only a broken one, or one older than CONN_MAX_AGE, is
    closed before a task (the next query opens a fresh one). Celery's Django fix-up would
    close them before and after every task — a new PostgreSQL connection per task —
    unless CELERY_DB_REUSE_MAX is set (config/settings.py)."""
    _child_termination.task_started()
    close_old_connections()


@worker_ready.connect
@worker_process_init.connect
def _freeze_startup_objects(**kwargs):
    """What start-up made lives as long as the process: out of the collector's sight
    (cronsvc.gc_tuning)."""
    freeze_startup_objects()


@worker_ready.connect
def _report_sandbox(**kwargs):
    """Whether this worker can run script jobs, kept fresh in Redis (scripts.py)."""
    scripts.start_reporting()


@worker_shutdown.connect
@worker_process_shutdown.connect
def _finish_late_runs(**kwargs):
    wait_for_late_runs(LATE_RUNS_SHUTDOWN_WAIT)


@task_postrun.connect
def _after_task(**kwargs):
    _child_termination.task_finished()


@worker_process_init.connect
def _in_pool_child(**kwargs):
    _child_termination.enable()


class _ChildTermination:
    """A prefork pool child lets the run it holds finish when SIGTERM reaches it directly.

    Heroku, honcho's Ctrl-C and ``kill -TERM -<pgid>`` signal every process of the group,
    the pool's children too, not only the main worker process. billiard's handler would
    raise SystemExit wherever the child's task happens to be: between taking a result
    and recording it, or inside the recording transaction. The run would then wait for
    its lease to end and be sent again. Here a SIGTERM that arrives during a task is held
    until the task returns (at most DELIVERY_HANDOFF_SECONDS plus the recording: the
    runs still in flight then go to the late recorder, which the child waits for on its
    way out, see ``_finish_late_runs``); the child then handles it as billiard would.
    Meanwhile the main process's warm shutdown waits for the task and then stops its
    children itself. A SIGTERM between tasks is billiard's as before (the main process
    sends it on a cold shutdown too)."""

    # After the task returns, the child first hands its result to the main process.
    RESEND_AFTER = 0.2

    def __init__(self):
        self.pid = None
        self.in_task = False
        self.held = False
        self.original = None

    def enable(self):
        self.pid = os.getpid()
        self.in_task = self.held = False
        self.original = None

    def _active(self):
        return self.pid == os.getpid() and threading.current_thread() is threading.main_thread()

    def task_started(self):
        if not self._active():
            return
        # billiard installs its own handler after worker_process_init: wrap it at the first task.
        current = signal.getsignal(signal.SIGTERM)
        # ``==``, not ``is``: each ``self._on_sigterm`` is a new bound-method object, and
        # keeping our own handler as "the original" would make it call itself forever.
        if current != self._on_sigterm:
            self.original = current
            signal.signal(signal.SIGTERM, self._on_sigterm)
        self.in_task = True

    def task_finished(self):
        if not self._active():
            return
        self.in_task = False
        if self.held:
            threading.Thread(target=self._resend, name="sigterm-resend", daemon=True).start()

    def _resend(self):
        time.sleep(self.RESEND_AFTER)
        os.kill(os.getpid(), signal.SIGTERM)

    def _on_sigterm(self, signum, frame):
        if self.in_task:
            self.held = True
            return
        self.held = False
        original = self.original
        if callable(original):
            original(signum, frame)
        elif original != signal.SIG_IGN:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)


_child_termination = _ChildTermination()
