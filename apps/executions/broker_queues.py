"""How many messages wait in each Celery queue, read from the broker itself: Redis lists
(one pipelined LLEN per queue and priority) or the embedded broker's folder. Used by the
metrics and the operators' dashboard, and by the sweeper to tell a lost message from one
still waiting its turn."""

import os
from functools import lru_cache

import redis
from django.conf import settings

# kombu's Redis transport keeps messages with a priority in extra lists named like this.
PRIORITY_SUFFIXES = ("", "\x06\x163", "\x06\x166", "\x06\x169")
TIMEOUT_SECONDS = 2.0  # the sweeper and the metrics wait this long; /readyz asks with less


def known_queues():
    """Every queue runs may be sent to: the default one and each plan's (with regions)."""
    from apps.billing.models import Plan

    from .routing import DEFAULT_QUEUE, all_run_queues

    plan_queues = sorted(set(Plan.objects.values_list("queue", flat=True)))
    return [DEFAULT_QUEUE, *all_run_queues(plan_queues)]


def queue_depths(queues):
    """{queue: messages waiting} (not those a worker has taken and not yet acknowledged)."""
    url = settings.CELERY_BROKER_URL
    if url.startswith("filesystem://"):
        return _folder_depths(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"], queues)
    pipe = broker_client(url).pipeline(transaction=False)
    for queue in queues:
        for suffix in PRIORITY_SUFFIXES:
            pipe.llen(queue + suffix)
    counts = pipe.execute()
    step = len(PRIORITY_SUFFIXES)
    return {queue: sum(counts[i * step:(i + 1) * step]) for i, queue in enumerate(queues)}


@lru_cache(maxsize=8)
def broker_client(url, timeout=TIMEOUT_SECONDS):
    """A Redis client for the broker at ``url`` (one per URL and timeout, reused)."""
    return redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout)


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
