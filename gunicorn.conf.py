"""Gunicorn settings and hooks (read from the working directory; the Procfiles give the
other options).

With PROMETHEUS_MULTIPROC_DIR set, a web worker that exits has its live gauges dropped
from /metrics (its counters stay: they are totals of the host)."""

import os

# Each worker listens on its own SO_REUSEPORT socket and the kernel spreads new connections
# over them. On one shared socket the worker that accepted last is woken first, so the
# kept-alive connections of a burst of clients (a proxy's pool, a load test) pile onto one
# worker while the others idle: measured, 588 of 676 requests of 20 clients went to one of
# four workers and the 95th percentile latency doubled. The cost: a connection still
# waiting in an exiting worker's own queue (a reload, a crash, a timeout kill) is reset
# instead of going to another worker; the client connects again.
reuse_port = True


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # prometheus-client alone: the arbiter never loads Django.
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


# A web worker holds ~150,000 long-lived objects (Django, DRF, the URLconf, the schema's
# serializers) that Python's cyclic garbage collector walks again in every full collection:
# ~100 ms with the request that triggered it waiting, several times a minute per worker
# under load. Once everything is loaded they are frozen out of its sight (gc.freeze), and
# young collections run after 10,000 allocations instead of 700: a page of 50 jobs alone
# allocates more than 700 objects that live until its response is written.
GC_YOUNG_THRESHOLD = 10_000


def post_worker_init(worker):
    import gc

    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018 - import every view module now, not on a request
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])
