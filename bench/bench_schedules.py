"""How many next-run computations per second the schedule engine does on one core.

Runs the same realistic mix (expressions x timezones, a fresh `after` per call)
through cronsvc.schedules.next_run, then through croniter and cronsim directly,
and prints the median of several rounds for each plus the ratios. Prints figures
only; it never passes or fails on a timing.

    .venv/bin/python bench/bench_schedules.py [--calls N] [--rounds R]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from croniter import croniter  # noqa: E402
from cronsim import CronSim  # noqa: E402

from cronsvc.schedules import CronSchedule, next_run  # noqa: E402
from cronsvc.schedules.runs import _next_cron_after_minute  # noqa: E402

UTC = timezone.utc
EXPRESSIONS = [
    "*/5 * * * *",
    "0 * * * *",
    "0 3 * * *",
    "30 2 * * 1-5",
    "0 9 1 * *",
    "0 0 L * *",
    "15 10 * * MON#2",
    "0 */6 * * *",
    "*/15 9-17 * * 1-5",
    "0 12 15W * *",
    "@daily",
    "@hourly",
    "*/10 * * * *",
    "0 8,12,18 * * *",
    "0 0 * * SUN",
]
ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Asia/Kolkata",
    "Australia/Lord_Howe",
    "America/Sao_Paulo",
    "Asia/Tokyo",
]
# croniter and cronsim lack macros; cronsim also lacks W (and croniter lacks nothing here).
_PLAIN = {"@daily": "0 0 * * *", "@hourly": "0 * * * *"}
_CRONSIM_SUBSTITUTE = {"0 12 15W * *": "0 12 15 * *"}


def workload(calls: int, seed: int = 7) -> list[tuple[str, str, datetime]]:
    """(expression, zone, after) triples: every call gets a fresh `after`."""
    rng = random.Random(seed)
    after = datetime(2027, 1, 1, tzinfo=UTC)
    items = []
    for _ in range(calls):
        after += timedelta(seconds=rng.randint(1, 3600), microseconds=rng.randint(0, 999_999))
        items.append((rng.choice(EXPRESSIONS), rng.choice(ZONES), after))
    return items


def run_ours(items):
    for expression, zone, after in items:
        next_run(CronSchedule(expression, zone), after)


def run_croniter(items):
    for expression, zone, after in items:
        croniter(_PLAIN.get(expression, expression), after.astimezone(ZoneInfo(zone))).get_next(datetime)


def run_cronsim(items):
    for expression, zone, after in items:
        expression = _CRONSIM_SUBSTITUTE.get(expression, _PLAIN.get(expression, expression))
        next(CronSim(expression, after.astimezone(ZoneInfo(zone))))


def rate(fn, items, rounds: int, before_round=None) -> float:
    fn(items[:200])  # warm caches of parsed expressions and zone transitions
    figures = []
    for _ in range(rounds):
        if before_round:
            before_round()
        start = time.perf_counter()
        fn(items)
        figures.append(len(items) / (time.perf_counter() - start))
    return statistics.median(figures)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    items = workload(args.calls)
    baseline_items = items[: max(2000, args.calls // 10)]  # the libraries are slow; fewer calls suffice

    ours_cold = rate(run_ours, items, args.rounds, before_round=_next_cron_after_minute.cache_clear)
    ours_memo = rate(
        run_ours, _same_minute_bursts(items), args.rounds, before_round=_next_cron_after_minute.cache_clear
    )
    croniter_rate = rate(run_croniter, baseline_items, args.rounds)
    cronsim_rate = rate(run_cronsim, baseline_items, args.rounds)

    print(
        f"mix: {len(EXPRESSIONS)} expressions x {len(ZONES)} timezones, fresh `after` per call, "
        f"median of {args.rounds} rounds, one core (Python {sys.version.split()[0]})"
    )
    print(f"  cronsvc.schedules next_run (memo cold)    {ours_cold:>10,.0f} /s")
    print(
        f"  cronsvc.schedules next_run (bursts, memo) {ours_memo:>10,.0f} /s   "
        "(10 jobs with the same schedule per minute, as when a scheduler dispatches a batch)"
    )
    print(f"  croniter 7.0 get_next                     {croniter_rate:>10,.0f} /s")
    print(f"  cronsim 2.8 next                          {cronsim_rate:>10,.0f} /s")
    print(
        f"  ratio ours/croniter: {ours_cold / croniter_rate:.1f}x   ours/cronsim: {ours_cold / cronsim_rate:.1f}x"
    )
    print(f"  target 25,000 /s: {'met' if ours_cold >= 25000 else 'NOT met'} (cold)")


def _same_minute_bursts(items):
    """The same workload, but each (expression, zone, minute) asked 10 times with different seconds."""
    burst = []
    for expression, zone, after in items[: len(items) // 10]:
        base = after.replace(second=0, microsecond=0)
        burst.extend((expression, zone, base + timedelta(seconds=s * 6)) for s in range(10))
    return burst


if __name__ == "__main__":
    main()
