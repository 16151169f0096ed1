"""Run outcomes into metrics: one hook call per recorded group (apps/executions/hooks.py).

The hook runs inside the recording transaction; the counters move only once it commits
(a rolled-back group is recorded again later and must not count twice). Per group it does
one pass over the outcomes and one increment per distinct (status, error kind).
"""

from django.db import transaction

from . import metrics

RETRY_PENDING = "queued"
DEAD = "dead"


def count_outcomes(outcomes):
    tally, durations = {}, []
    attempts = retries = dead = 0
    for outcome in outcomes:
        if outcome.moved:  # an attempt stored after its lease was lost changes no run
            key = (outcome.status, outcome.error_kind or "")
            tally[key] = tally.get(key, 0) + 1
        if outcome.attempt_counted:
            attempts += 1
            if outcome.duration_ms is not None:
                durations.append(outcome.duration_ms / 1000.0)
        if not outcome.moved:
            continue
        if outcome.status == RETRY_PENDING and outcome.attempt_number is not None:
            retries += 1
        elif outcome.status == DEAD:
            dead += 1
    return tally, durations, attempts, retries, dead


def on_outcomes(outcomes):
    counted = count_outcomes(outcomes)
    transaction.on_commit(lambda: _publish(*counted))


def _publish(tally, durations, attempts, retries, dead):
    for (status, error_kind), count in tally.items():
        metrics.EXECUTIONS.labels(status, error_kind).inc(count)
    if attempts:
        metrics.ATTEMPTS.inc(attempts)
    if retries:
        metrics.RETRIES.inc(retries)
    if dead:
        metrics.DEAD.inc(dead)
    metrics.observe_many(metrics.DELIVERY_DURATION, durations)
