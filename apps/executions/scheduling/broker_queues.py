"""How many messages wait in each Celery queue, read from the broker itself: Redis lists
(one pipelined LLEN per queue and priority), RabbitMQ queues (a passive ``queue.declare``
each, whose answer carries the count of ready messages) or the embedded broker's folder.
Used by the metrics and the operators' dashboard, and by the sweeper to tell a lost message
from one still waiting its turn."""

import os
import threading
from functools import lru_cache

import redis
from amqp.exceptions import NotFound
from django.conf import settings
from kombu import Connection

from apps.plans.models import Plan
from cronsvc.brokers import broker_kind

# kombu's Redis transport keeps messages with a priority in extra lists named like this.
PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")
TIMEOUT_SECONDS = 2.0  # the sweeper and the metrics wait this long; /readyz asks with less


def known_queues():
    """Every queue runs may be sent to: the default one and each plan's (with regions)."""
    from ..routing import DEFAULT_QUEUE, all_run_queues

    plan_queues = sorted(set(Plan.objects.values_list("queue", flat=True)))
    return [DEFAULT_QUEUE, *all_run_queues(plan_queues)]


def queue_depths(queues):
    """{queue: messages waiting} (not those a worker has taken and not yet acknowledged)."""
    url = settings.CELERY_BROKER_URL
    kind = broker_kind(url)
    if kind == "filesystem":
        return _folder_depths(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"], queues)
    if kind == "amqp":
        return amqp_inspector(url).message_counts(queues)
    pipe = broker_client(url).pipeline(transaction=False)
    for queue in queues:
        for suffix in PRIORITY_SUFFIXES:
            pipe.llen(queue + suffix)
    counts = pipe.execute()
    step = len(PRIORITY_SUFFIXES)
    return {queue: sum(counts[i * step:(i + 1) * step]) for i, queue in enumerate(queues)}


@lru_cache(maxsize=8)
def broker_client(url, timeout=TIMEOUT_SECONDS):
    """A Redis client for the broker at ``url`` (one per URL and timeout, reused): every
    Redis client's options, with this caller's shorter timeouts."""
    return redis.Redis.from_url(url, **{**settings.REDIS_CLIENT_OPTIONS, "socket_connect_timeout": timeout,
                                        "socket_timeout": timeout})


@lru_cache(maxsize=8)
def amqp_inspector(url, timeout=TIMEOUT_SECONDS):
    """The RabbitMQ inspector for ``url`` (one per URL and timeout, reused)."""
    return AmqpInspector(url, timeout)


class AmqpInspector:
    """Asks RabbitMQ about queues over one connection kept open and shared by the
    process's threads: opening one costs several round trips and a line in the broker's
    log, too much for every scrape and health probe. A failure closes it, and a call that
    failed on the kept connection is asked again on a new one. A forked child never reuses
    its parent's socket."""

    def __init__(self, url, timeout):
        self.url, self.timeout = url, timeout
        self._lock = threading.Lock()
        self._connection = self._channel = None
        self._pid = None

    def message_counts(self, queues):
        """{queue: ready messages}; 0 for a queue that does not exist (yet)."""
        with self._lock:
            return self._guarded(lambda: {queue: self._count(queue) for queue in queues})

    def ping(self):
        """One round trip to the broker (a passive declare of an exchange every vhost has)."""
        with self._lock:
            self._guarded(lambda: self._open_channel().exchange_declare("amq.direct", "direct", passive=True))

    def _guarded(self, ask):
        kept = self._connection is not None and self._pid == os.getpid()
        try:
            return ask()
        except Exception:
            self._close()
            if not kept:
                raise
        # The kept connection had gone (a broker restart, an idle link cut): that says
        # nothing about the broker now, so ask once more on a new one.
        return self._guarded(ask)

    def _count(self, queue):
        try:
            return self._open_channel().queue_declare(queue=queue, passive=True).message_count
        except NotFound:  # RabbitMQ closes the channel on a 404: the next queue gets a new one
            self._channel = None
            return 0

    def _open_channel(self):
        if self._pid != os.getpid():
            self._connection = self._channel = None  # the parent's; never touch its socket
            self._pid = os.getpid()
        if self._channel is None:
            if self._connection is None:
                self._connection = Connection(self.url, connect_timeout=self.timeout, transport_options={
                    "read_timeout": self.timeout, "write_timeout": self.timeout})
            self._channel = self._connection.channel()
        return self._channel

    def _close(self):
        connection, self._connection, self._channel = self._connection, None, None
        if connection is not None:
            connection.collect()  # drops the socket without a goodbye a broken link cannot carry


def _folder_depths(folder, queues):
    # kombu's filesystem transport names each message <time>_<uuid>.<queue>.msg
    depths = dict.fromkeys(queues, 0)
    with os.scandir(folder) as entries:
        for entry in entries:
            stem, _, _ = entry.name.rpartition(".msg")
            queue = stem.partition(".")[2]  # queue names may hold dots themselves
            if queue in depths:
                depths[queue] += 1
    return depths
