import os
import signal

from celery import Celery, platforms
from celery.apps.beat import Beat as CeleryBeat
from celery.signals import worker_ready, worker_shutdown

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("cronsvc")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


class GracefulBeat(CeleryBeat):
    """The housekeeping process (celery beat) stopping on SIGTERM/SIGINT at once, without
    hanging.

    Celery's own handler saves the schedule inside the signal handler. When the signal
    lands while beat is talking to the database (building the DatabaseScheduler at
    start-up, or a tick's query), that handler starts a second query on the connection in
    use and waits for it forever (found by tests/operations/test_graceful_shutdown.py; a
    supervisor then has to SIGKILL it). Here the handler never touches the database: if
    beat was waiting between ticks it stops the loop there (the loop saves the schedule
    on its way out); if it was busy, it asks the loop to stop and looks again every 0.1 s
    until beat is back in its wait (honcho and Heroku allow only a few seconds)."""

    def install_sync_handler(self, service):
        loop = type(service).start.__code__

        def stop_if_waiting(signum, frame):
            if frame is not None and frame.f_code is loop:
                signal.setitimer(signal.ITIMER_REAL, 0)
                raise SystemExit()

        def request_stop(signum, frame):
            service.stop(wait=False)
            signal.signal(signal.SIGALRM, stop_if_waiting)
            signal.setitimer(signal.ITIMER_REAL, 0.1, 0.1)
            stop_if_waiting(signum, frame)

        def sync():  # the loop's last act: no more looking
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
            save_schedule()

        save_schedule, service.sync = service.sync, sync
        platforms.signals.update(SIGTERM=request_stop, SIGINT=request_stop)


app.Beat = app.subclass_with_self(GracefulBeat)


# --- Observability: a heartbeat row per worker process, shown by /readyz and the admin;
# at shutdown the process's live Prometheus gauges are dropped (multiprocess mode).
_heartbeat = {}


@worker_ready.connect
def _start_heartbeat(sender=None, **kwargs):
    from apps.observability.heartbeats import WorkerBeat

    consumer = getattr(sender, "task_consumer", None)
    queues = [queue.name for queue in consumer.queues] if consumer is not None else []
    beat = WorkerBeat(name=getattr(sender, "hostname", "") or "worker", queues=queues)
    beat.start()
    _heartbeat["beat"] = beat


@worker_shutdown.connect
def _stop_heartbeat(**kwargs):
    beat = _heartbeat.pop("beat", None)
    if beat is not None:
        beat.stop()
    from apps.observability.metrics import process_exited

    process_exited()
