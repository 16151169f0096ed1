"""Metrics computed when /metrics is scraped (web process): Celery queue depths, read from
the broker (Redis, RabbitMQ or the embedded broker's folder: apps/executions/scheduling/broker_queues.py),
the circuit breakers' states, read from Redis, and the event stream's outbox backlog, read
from the database. The apps above observability add theirs with ``on_scrape`` (monitors by
state: apps/monitors/gauges.py).

All are bounded: the known queues only (one pipelined LLEN each on Redis, one passive
declare each on RabbitMQ), at most BREAKER_SCAN_LIMIT breaker keys (SCAN, then pipelined
HGET), and the outbox counted up to OUTBOX_COUNT_LIMIT rows."""

import logging

from prometheus_client.core import GaugeMetricFamily

from apps.executions.scheduling.broker_queues import known_queues, queue_depths

log = logging.getLogger("cronsvc.metrics")

BREAKER_PREFIX = "cronsvc:cb:"
BREAKER_SCAN_LIMIT = 10_000
BREAKER_STATES = ("closed", "open", "half_open")
OUTBOX_COUNT_LIMIT = 1_000_000

_scrape_collectors = []


def on_scrape(collector):
    """Register a collector (``collect()`` yielding metric families) read at each scrape."""
    if collector not in _scrape_collectors:
        _scrape_collectors.append(collector)
    return collector


def scrape_collectors():
    return [QueueDepthCollector(), BreakerStateCollector(), OutboxBacklogCollector(), *_scrape_collectors]


def breaker_states(client):
    counts = dict.fromkeys(BREAKER_STATES, 0)
    keys = []
    for key in client.scan_iter(match=BREAKER_PREFIX + "*", count=1000):
        keys.append(key)
        if len(keys) >= BREAKER_SCAN_LIMIT:
            break
    if not keys:
        return counts
    pipe = client.pipeline(transaction=False)
    for key in keys:
        pipe.hget(key, "state")
    for state in pipe.execute():
        state = (state or b"closed").decode()
        counts[state] = counts.get(state, 0) + 1
    return counts


class QueueDepthCollector:
    def collect(self):
        family = GaugeMetricFamily("cronsvc_queue_depth", "Messages waiting in each Celery queue.",
                                   labels=["queue"])
        try:
            for queue, depth in queue_depths(known_queues()).items():
                family.add_metric([queue], depth)
        except Exception:  # noqa: BLE001 - a scrape must not fail because the broker is down
            log.warning("queue depths unavailable", exc_info=True)
        yield family


class BreakerStateCollector:
    def collect(self):
        family = GaugeMetricFamily(
            "cronsvc_circuit_breakers", "Target hosts by circuit breaker state (closed = counting failures).",
            labels=["state"])
        from apps.executions.shared_redis import redis_client

        client = redis_client()
        if client is not None:
            try:
                for state, count in breaker_states(client).items():
                    family.add_metric([state], count)
            except Exception:  # noqa: BLE001 - a scrape must not fail because Redis is down
                log.warning("circuit breaker states unavailable", exc_info=True)
        yield family


class OutboxBacklogCollector:
    def collect(self):
        family = GaugeMetricFamily(
            "cronsvc_event_outbox_backlog",
            f"Event stream outbox rows not yet published to Redis (counted up to {OUTBOX_COUNT_LIMIT}).")
        from apps.eventstream.models import OutboxEntry

        try:
            family.add_metric([], OutboxEntry.objects.all()[:OUTBOX_COUNT_LIMIT].count())
        except Exception:  # noqa: BLE001 - a scrape must not fail because the database is down
            log.warning("event outbox backlog unavailable", exc_info=True)
        yield family
