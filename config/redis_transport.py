"""The Redis broker transport: a worker rides out a broker restart, a full Redis and
messages it cannot read, and never exits because of them (architecture invariant 6).

- Broker restart. When Redis goes away mid-consume, Celery 5.7 closes the broken
  connection (``Consumer.on_connection_error_after_connected``), and a task finishing
  afterwards acks its message on the closed channel. Both reach kombu's Redis channel after
  its connection is gone, where building a client dereferences ``connection.client``
  (None) and raises AttributeError — not a connection error, so the worker calls it
  unrecoverable and exits (found by the chaos soak; tests/operations/test_broker_loss.py).
  Here that case raises the connection error it is: Celery logs it, drops the ack (the
  message comes back after the visibility timeout, and the run's claim makes a second
  delivery a no-op) and reconnects.
- Redis at ``maxmemory`` (policy noeviction). Taking a message (BRPOP) still works, but
  kombu's note of it as unacknowledged (ZADD + HSET) is refused with OutOfMemoryError,
  which killed the worker with the message already out of its queue. Here the message is
  run all the same, with the note kept in the process only (``QoS.append``): running it
  is what drains the queue and frees Redis. Should the worker die before acknowledging it,
  the database covers what the broker's note would have: the run's lease ends and the
  sweeper hands it back. Logged at most every ``OOM_LOG_INTERVAL`` seconds, counted
  always (``cronsvc_worker_broker_errors_total{kind="oom"}``).
- A worker (re)started while Redis is at maxmemory cannot declare its queues: the
  refusal counts as a connection error (``Transport.connection_errors``), so it retries
  until Redis has memory again instead of exiting.
- Poison messages. A message that is not JSON, not kombu's envelope, or that Celery's
  consumer fails on, used to end the worker ("Unrecoverable error") and, under honcho,
  every other process. Here it is dead-lettered (apps/executions/worker/deadletters.py) and
  acknowledged, and the worker takes the next one. Celery's own refusals (a body it
  cannot decode, an unknown task: config/celery.py) and a run task's wrong arguments
  (apps/executions/tasks.py) are dead-lettered the same way.
"""

import logging
import time

from kombu.transport import redis as kombu_redis
from kombu.transport import virtual
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import OutOfMemoryError

log = logging.getLogger(__name__)

#: Seconds between two log lines about Redis refusing writes (the metric counts them all).
OOM_LOG_INTERVAL = 10.0


class PoisonMessage(Exception):
    """A message taken from a queue that is not a kombu message."""

    def __init__(self, reason, raw):
        super().__init__(reason)
        self.reason, self.raw = reason, raw


class Message(virtual.Message):
    def __init__(self, payload, channel=None, **kwargs):
        try:
            super().__init__(payload, channel=channel, **kwargs)
            delivery = self.delivery_info
            delivery["exchange"], delivery["routing_key"]  # what noting it unacknowledged reads
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise PoisonMessage(f"not a kombu message: {exc.__class__.__name__}: {exc}", payload) from exc


class QoS(kombu_redis.QoS):
    def append(self, message, delivery_tag):
        try:
            super().append(message, delivery_tag)
        except OutOfMemoryError:
            virtual.QoS.append(self, message, delivery_tag)  # kept in the process: acks still work
            broker_trouble("oom", "Redis is at maxmemory: message %s runs without its unacknowledged note "
                                  "(its run's lease covers a crash)", delivery_tag)

    def ack(self, delivery_tag):
        try:
            super().ack(delivery_tag)
        except OutOfMemoryError:
            self._forget_outside_multi(delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        try:
            super().reject(delivery_tag, requeue=requeue)
        except OutOfMemoryError:
            # Putting it back needs memory: it stays out, and its run, queued or leased in
            # the database, is published again by the sweeper.
            self._forget_outside_multi(delivery_tag)

    def restore_visible(self, *args, **kwargs):
        """Redelivering messages left unacknowledged by a dead consumer takes a lock (SET)
        that Redis at maxmemory refuses: a worker (re)started then must not die of it. The
        scan runs again at the next poll; meanwhile the sweeper re-sends their runs."""
        try:
            return super().restore_visible(*args, **kwargs)
        except OutOfMemoryError:
            broker_trouble("oom", "Redis is at maxmemory: unacknowledged messages are restored later")

    def _forget_outside_multi(self, delivery_tag):
        """Under maxmemory Redis refuses every command inside MULTI, even the removals
        kombu wraps its ack in; alone they are allowed (they free memory)."""
        with self.channel.conn_or_acquire() as client:
            client.pipeline(transaction=False).zrem(self.unacked_index_key, delivery_tag).hdel(
                self.unacked_key, delivery_tag).execute()
        virtual.QoS.ack(self, delivery_tag)
        broker_trouble("oom", "Redis is at maxmemory: message %s acknowledged outside a transaction", delivery_tag)


class Channel(kombu_redis.Channel):
    QoS = QoS
    Message = Message

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Which queue BRPOP answered from, for a message that then fails to decode: kombu
        # tells its queue cycle (whatever its order strategy) just before decoding.
        self._last_queue = ""
        cycle = self._queue_cycle
        rotate = cycle.rotate

        def note_and_rotate(last_used):
            self._last_queue = last_used
            return rotate(last_used)

        cycle.rotate = note_and_rotate

    def _connparams(self, asynchronous=False):
        if self.connection is None or self.connection.client is None:
            raise RedisConnectionError("the broker connection is closed")
        return super()._connparams(asynchronous=asynchronous)

    def _brpop_read(self, **options):
        try:
            return super()._brpop_read(**options)
        except PoisonMessage as exc:
            _dead_letter(self._last_queue, exc.reason, exc.raw)
        except ValueError as exc:  # JSON or UTF-8 that does not decode (kombu's loads)
            raw = getattr(exc, "doc", None) or getattr(exc, "object", None) or ""
            _dead_letter(self._last_queue, f"not JSON: {exc}", raw)
        return True  # a message was taken

    def _get(self, queue):  # the polling path (basic_get, or a transport without an event loop)
        try:
            return super()._get(queue)
        except ValueError as exc:
            _dead_letter(queue, f"not JSON: {exc}", getattr(exc, "doc", None) or getattr(exc, "object", ""))
            raise virtual.Empty() from exc

    def basic_consume(self, queue, no_ack, callback, consumer_tag, **kwargs):
        errors = self.connection.connection_errors + self.connection.channel_errors

        def guarded(message):
            try:
                return callback(message)
            except errors:
                raise
            except Exception as exc:  # noqa: BLE001 - one message never stops the worker
                _dead_letter(queue, f"the consumer failed on it: {exc.__class__.__name__}: {exc}", message._raw)
                if not no_ack:
                    message.ack()

        return super().basic_consume(queue, no_ack, guarded, consumer_tag, **kwargs)


class Transport(kombu_redis.Transport):
    Channel = Channel
    # Redis at maxmemory refusing what a worker needs to start consuming (declaring its
    # queues: LLEN inside MULTI; binding them: SADD) is a broker that cannot serve yet, as
    # one that is down: Celery retries the connection with its backoff instead of calling
    # the error unrecoverable and exiting (found by the chaos soak: a worker restarted
    # while Redis was full). What consuming meets at maxmemory is handled above (QoS).
    connection_errors = kombu_redis.Transport.connection_errors + (OutOfMemoryError,)


def _dead_letter(queue, reason, raw):
    from apps.executions.worker import deadletters

    deadletters.record(queue, reason, raw)


_last_logged = {}


def broker_trouble(kind, message, *args):
    """Count a broker trouble (``cronsvc_worker_broker_errors_total{kind}``); log it at most
    every OOM_LOG_INTERVAL seconds per kind."""
    try:
        from apps.observability.metrics import WORKER_BROKER_ERRORS

        WORKER_BROKER_ERRORS.labels(kind).inc()
    except Exception:  # noqa: BLE001 - counting never stops the worker
        log.debug("counting a broker error failed", exc_info=True)
    now = time.monotonic()
    if now - _last_logged.get(kind, -OOM_LOG_INTERVAL) >= OOM_LOG_INTERVAL:
        _last_logged[kind] = now
        log.warning(message, *args)
