"""Gunicorn hooks (read from the working directory; the Procfiles give the other options).

With PROMETHEUS_MULTIPROC_DIR set, a web worker that exits has its live gauges dropped
from /metrics (its counters stay: they are totals of the host)."""

import os


def child_exit(server, worker):
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # prometheus-client alone: the arbiter never loads Django.
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
