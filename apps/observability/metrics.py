"""Every Prometheus metric of cronsvc, defined once.

Each process type (web, scheduler, workers) imports this module and moves its own
metrics. With PROMETHEUS_MULTIPROC_DIR set (before the process starts) prometheus-client
writes them to files in that directory and the web process's ``/metrics`` adds up the
files of every process on the host; without it, ``/metrics`` shows the web process only.

The scheduler and the workers are hot paths (thousands of runs a second), so they move
metrics once per batch: ``Counter.inc(n)`` and ``observe_many`` below, never a Python
loop of ``observe()`` calls with a lock each.

Every labelled series whose label values are known in advance exists at 0 from start-up
(``declare_known_series``), so a dashboard shows 0, not "No data", before the first event.
"""

import os
from bisect import bisect_left

from prometheus_client import Counter, Gauge, Histogram

# Lateness of a dispatch: from a run's scheduled time to its publish to the broker.
LAG_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 300, 900)
# Duration of the customer's HTTP request.
DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
API_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

DISPATCH_LAG = Histogram(
    "cronsvc_dispatch_lag_seconds", "Publish time minus scheduled time of each dispatched run.",
    buckets=LAG_BUCKETS,
)
DISPATCHES = Counter("cronsvc_dispatches_total", "Runs the scheduler handed to the broker.")
SCHEDULER_TICKS = Counter("cronsvc_scheduler_ticks_total", "Scheduler ticks that claimed due jobs.")
BACKLOG = Gauge(
    "cronsvc_scheduler_backlog", "Jobs due for over a second and not claimed yet (capped count).",
    multiprocess_mode="livemax",
)
LOST, LEASE_EXPIRED = "lost", "lease_expired"
SWEEP_REASONS = (LOST, LEASE_EXPIRED)
SWEEPER_REPUBLISHES = Counter(
    "cronsvc_sweeper_republishes_total",
    "Runs the sweeper published again: reason=lost (message lost) or lease_expired (worker died).",
    ["reason"],
)
RETRIES_PUBLISHED = Counter("cronsvc_retries_published_total", "Waiting retries and deferred runs published when due.")
EXECUTIONS = Counter(
    "cronsvc_executions_total",
    "Run outcomes recorded, by new status (queued = a retry is scheduled) and error kind.",
    ["status", "error_kind"],
)
RETRIES = Counter("cronsvc_retries_total", "Failed attempts followed by a scheduled retry.")
DEAD = Counter("cronsvc_dead_executions_total", "Runs that exhausted their retries (status dead).")
ATTEMPTS = Counter("cronsvc_attempts_total", "HTTP attempts made for customers (what usage meters).")
DELIVERY_DURATION = Histogram(
    "cronsvc_delivery_duration_seconds", "Duration of each HTTP attempt to a customer's endpoint.",
    buckets=DURATION_BUCKETS,
)
# A worker's troubles that it rides out instead of exiting (architecture invariant 6).
#: What a dead letter is counted under: its reason up to the first colon (the reasons
#: config/celery.py, config/redis_transport.py and apps/executions/tasks.py give).
DEAD_LETTER_REASONS = ("not JSON", "not a kombu message", "not a Celery task message", "unknown task",
                       "invalid task", "wrong arguments", "the consumer failed on it")
DEAD_LETTERS = Counter(
    "cronsvc_dead_letters_total",
    "Messages a worker could not read and put aside (apps/executions/worker/deadletters.py), by reason.",
    ["reason"],
)
BROKER_TROUBLES = ("oom", "connection")  # config/redis_transport.py's broker_trouble(kind)
WORKER_BROKER_ERRORS = Counter(
    "cronsvc_worker_broker_errors_total",
    "Broker troubles a worker rode out: kind=oom (Redis at maxmemory) or connection (lost, reconnecting).",
    ["kind"],
)
HOOK_ERRORS = Counter(
    "cronsvc_outcome_hook_errors_total",
    "Exceptions raised by a hook riding on run outcomes (logged; the outcome is recorded without it).",
    ["hook"],
)
LOOP_PARTS = ("heartbeat", "retries", "relay", "sweep")  # apps/executions/scheduling/process.py's guarded parts
LOOP_ERRORS = Counter(
    "cronsvc_loop_errors_total",
    "Parts of a scheduler tick that raised (logged) while job scheduling went on, by part "
    "(hook:<module>, relay, retries, sweep, heartbeat).",
    ["part"],
)
CLOCK_SKEW = Gauge(
    "cronsvc_clock_skew_seconds",
    "This process's clock minus the database's (positive: ahead), measured at its last read of the database's time.",
    ["process"], multiprocess_mode="liveall",
)
PING_KINDS = ("success", "start", "fail")  # apps.monitors.models.Ping.Kind (a test compares them)
PINGS = Counter("cronsvc_pings_total", "Monitor pings stored, by kind (refused and unknown ones are not counted).",
                ["kind"])
API_LATENCY = Histogram(
    "cronsvc_http_request_duration_seconds", "Web and API request latency by route name, method and status.",
    ["endpoint", "method", "status"], buckets=API_BUCKETS,
)


def declare_known_series():
    """Create, at 0, every series whose label values are known in advance (called when the
    app is ready, and again at each scrape for the hooks the apps after observability
    registered since). Idempotent. Not declared: error kinds (an open set), API routes and
    statuses, and the clock skew of processes (a gauge at 0 would claim a reading)."""
    from apps.executions import hooks
    from cronsvc import statuses

    # An outcome moves a run to one of its final statuses, or back to queued (a retry).
    for status in sorted(statuses.FINAL | {"queued"}):
        EXECUTIONS.labels(status, "")
    for family, values in ((SWEEPER_REPUBLISHES, SWEEP_REASONS), (DEAD_LETTERS, DEAD_LETTER_REASONS),
                           (WORKER_BROKER_ERRORS, BROKER_TROUBLES), (PINGS, PING_KINDS),
                           (LOOP_ERRORS, (*LOOP_PARTS, *hooks.tick_hook_parts())),
                           (HOOK_ERRORS, hooks.outcome_hook_names())):
        for value in values:
            family.labels(value)


def observe_many(histogram, values):
    """``histogram.observe(v)`` for each value, at the cost of one increment per bucket
    touched: values are counted into buckets first (bisect), then each bucket and the sum
    move once. Uses prometheus-client's Histogram internals (_upper_bounds, _buckets, _sum,
    stable since 0.4); falls back to plain observe() if they ever change."""
    if not values:
        return
    bounds = getattr(histogram, "_upper_bounds", None)
    buckets = getattr(histogram, "_buckets", None)
    if bounds is None or buckets is None:
        for value in values:
            histogram.observe(value)
        return
    counts = {}
    for value in values:
        index = bisect_left(bounds, value)
        counts[index] = counts.get(index, 0) + 1
    for index, count in counts.items():
        buckets[index].inc(count)
    histogram._sum.inc(sum(values))


def record_dispatch(lags, published):
    """One scheduler tick's dispatch: ``lags`` in seconds, ``published`` ids sent."""
    SCHEDULER_TICKS.inc()
    if published:
        DISPATCHES.inc(published)
    observe_many(DISPATCH_LAG, lags)


def record_sweep(recovered, lost):
    if recovered:
        SWEEPER_REPUBLISHES.labels(LEASE_EXPIRED).inc(recovered)
    if lost:
        SWEEPER_REPUBLISHES.labels(LOST).inc(lost)


def record_loop_error(part):
    LOOP_ERRORS.labels(part).inc()


def process_exited(pid=None):
    """Drop a stopped process's live gauges (``livemax`` backlog) in multiprocess mode."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid or os.getpid())
