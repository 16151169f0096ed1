"""Whether to try a delivery again, and after how long.

Retried: 5xx, 408/425/429, connection and DNS failures (nothing or nothing useful reached
the receiver), a 2xx whose body did not match the criteria (the receiver answered but says
the work did not happen, which is what body criteria exist to catch), and a delivery the
circuit breaker held back. Timeouts only when the job opts in: the receiver may have done
the work and simply answered late. Never: other 4xx, TLS errors, forbidden targets and
redirect/unexpected statuses, which repeat identically until someone changes something.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime

from .outcome import INVALID_RESPONSE, Outcome

RETRYABLE_4XX = frozenset({408, 425, 429})
ALWAYS_RETRIED = frozenset({"http_5xx", "connect_error", "dns_error", "body_mismatch", "circuit_open", INVALID_RESPONSE,
                            # script jobs (apps/executions/worker/scripts.py): a non-zero exit or a limit hit
                            # is retried like a 5xx, and so is a sandbox that failed to start once
                            "script_exit", "cpu_limit", "oom", "process_limit", "output_limit",
                            "sandbox_failed"})


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 3  # including the first
    initial_delay: float = 10.0  # seconds
    max_delay: float = 3600.0
    multiplier: float = 2.0
    retry_on_timeout: bool = False


def should_retry(outcome: Outcome, status_code: int | None, attempt: int, policy: RetryPolicy) -> bool:
    """``attempt`` is the 1-based number of the attempt that produced ``outcome``."""
    if outcome.succeeded or attempt >= policy.max_attempts:
        return False
    kind = outcome.error_kind
    if kind == "http_4xx":
        return status_code in RETRYABLE_4XX
    if kind == "timeout":
        return policy.retry_on_timeout
    return kind in ALWAYS_RETRIED


def next_delay(
    attempt: int,
    policy: RetryPolicy,
    *,
    retry_after: float | None,
    rng: random.Random,
) -> float:
    """Seconds to wait before attempt ``attempt + 1``.

    Full jitter (uniform between 0 and the exponential cap) spreads the retries of many
    jobs that failed together; a receiver's Retry-After wins, capped by ``max_delay``.
    """
    if retry_after is not None:
        return min(max(retry_after, 0.0), policy.max_delay)
    return rng.uniform(0.0, backoff_cap(attempt, policy))


def backoff_cap(attempt: int, policy: RetryPolicy) -> float:
    """``min(max_delay, initial_delay * multiplier ** (attempt - 1))``, overflow-safe."""
    try:
        cap = policy.initial_delay * policy.multiplier ** max(attempt - 1, 0)
    except OverflowError:
        return policy.max_delay
    return min(cap, policy.max_delay)


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Seconds from ``now`` per a Retry-After header: delta-seconds or an HTTP-date.

    None when absent or unparseable; a date in the past gives 0.
    """
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, (_aware(when) - _aware(now)).total_seconds())


def _aware(moment: datetime) -> datetime:
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)
