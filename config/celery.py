import os
import signal

from celery import Celery, platforms
from celery.apps.beat import Beat as CeleryBeat
from celery.signals import worker_ready, worker_shutdown
from celery.worker.consumer import Consumer as CeleryConsumer

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("cronsvc")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# A worker never gives up on its broker: it retries the connection for as long as it is
# down (kombu's back-off: 2 s, 4 s, ... up to 30 s between tries), counting each loss;
# Celery's default stops the worker after 100 failed tries.
app.conf.update(broker_connection_max_retries=None, worker_consumer="config.celery:Consumer")


class Consumer(CeleryConsumer):
    """Celery's consumer, with the messages it refuses dead-lettered rather than only
    logged (apps/executions/worker/deadletters.py) and its broker losses counted
    (``cronsvc_worker_broker_errors_total{kind="connection"}``). What the transport
    cannot even read is dead-lettered there (config/redis_transport.py)."""

    def on_decode_error(self, message, exc):
        _dead_letter(message, f"undecodable body: {exc.__class__.__name__}: {exc}")
        super().on_decode_error(message, exc)

    def on_unknown_message(self, body, message):
        _dead_letter(message, "not a Celery task message")
        super().on_unknown_message(body, message)

    def on_unknown_task(self, body, message, exc):
        _dead_letter(message, f"unknown task: {exc}")
        super().on_unknown_task(body, message, exc)

    def on_invalid_task(self, body, message, exc):
        _dead_letter(message, f"invalid task: {exc}")
        super().on_invalid_task(body, message, exc)

    def on_connection_error_before_connected(self, exc):
        _count_connection_loss()
        super().on_connection_error_before_connected(exc)

    def on_connection_error_after_connected(self, exc):
        _count_connection_loss()
        super().on_connection_error_after_connected(exc)


def _dead_letter(message, reason):
    from apps.executions.worker import deadletters

    delivery = getattr(message, "delivery_info", None) or {}
    queue = delivery.get("routing_key") or delivery.get("exchange") or ""
    raw = getattr(message, "_raw", None) or {"headers": message.headers, "body": message.body}
    deadletters.record(queue, reason, raw)


def _count_connection_loss():
    from config.redis_transport import broker_trouble

    broker_trouble("connection", "broker connection lost: reconnecting with back-off")


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
