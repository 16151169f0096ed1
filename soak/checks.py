"""The invariants, checked from the database and the target's log after the drain."""

import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

#: Faults that can make a worker send a request again: the worker died mid-request or was
#: paused past its lease, or the database or the broker went away between the request and
#: its recording. (Only where the schema records no take-backs: see check_requests.)
RESENDING_FAULTS = ("worker", "postgres", "redis", "worker-pause", "postgres-net", "redis-net")
#: A request is cut off by a fault that strikes while it is in flight or before its
#: outcome is recorded: from just before its arrival (clocks, the target's own latency)
#: until its timeout (5 s in the soak) plus the recording has passed.
IN_FLIGHT_BEFORE, IN_FLIGHT_AFTER = 1.0, 15.0
#: A job whose next run is overdue by more than this when the soak stops the jobs was left
#: behind (no scheduler claimed it): longer than any single fault holds the schedulers up.
LEFT_BEHIND_SECONDS = 20.0


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


@dataclass
class Findings:
    checks: list = field(default_factory=list)
    figures: list = field(default_factory=list)  # (name, value)
    tally: dict = field(default_factory=dict)  # lost, doubled, early, superseded, stuck
    faults: list = field(default_factory=list)  # rows for the fault table

    @property
    def ok(self):
        return all(c.ok for c in self.checks)

    def check(self, name, ok, detail):
        self.checks.append(Check(name, bool(ok), detail))


def expected_occurrences(start_at, interval, next_run_at):
    """Every occurrence of an interval job from its anchor until (excluding) the next one
    it would have run: computed here, independently of the scheduler's engine."""
    if next_run_at is None:
        return []
    step = timedelta(seconds=interval)
    out, at = [], start_at
    while at < next_run_at:
        out.append(at)
        at += step
    return out


def check_occurrences(findings, final_jobs, executions, disabled_at=None):
    """Each job's occurrences up to the next run it would have made, as of ``disabled_at``
    (when the soak stopped the jobs), have exactly one execution each. A job whose next run
    was already LEFT_BEHIND_SECONDS overdue then was left behind: the occurrences it never
    got to (up to that mark) count as lost too, or a job no scheduler ever claimed again
    would pass unseen."""
    by_occurrence = Counter((e["job_id"], e["scheduled_for"]) for e in executions if e["trigger"] == "schedule")
    expected = set()
    off_grid_next = 0
    left_behind = 0
    for job_id, (start_at, interval, next_run_at) in final_jobs.items():
        occurrences = expected_occurrences(start_at, interval, next_run_at)
        expected.update((job_id, at) for at in occurrences)
        if next_run_at is not None and (next_run_at - start_at).total_seconds() % interval:
            off_grid_next += 1
        if disabled_at is not None and next_run_at is not None:
            mark = disabled_at - LEFT_BEHIND_SECONDS
            at = next_run_at
            while at.timestamp() <= mark:
                left_behind += 1
                at += timedelta(seconds=interval)
    lost = len(expected - set(by_occurrence)) + left_behind
    doubled = sum(n - 1 for n in by_occurrence.values() if n > 1)
    unexpected = len(set(by_occurrence) - expected)
    findings.figures.append(("occurrences due in the window", f"{len(expected):,}"))
    findings.tally["lost"] = lost
    findings.tally["doubled"] = findings.tally.get("doubled", 0) + doubled
    findings.check("every occurrence has exactly one execution row",
                   lost == 0 and doubled == 0 and unexpected == 0 and off_grid_next == 0,
                   f"lost: {lost} ({left_behind} left behind: overdue by over {LEFT_BEHIND_SECONDS:.0f} s when "
                   f"the jobs stopped), doubled: {doubled}, rows for no due occurrence: {unexpected}, "
                   f"jobs whose next run is off their grid: {off_grid_next}")


def check_final(findings, executions, final_statuses):
    statuses = Counter(e["status"] for e in executions)
    stuck = sum(n for status, n in statuses.items() if status not in final_statuses)
    findings.tally["stuck"] = stuck
    findings.figures.append(("executions by status", ", ".join(f"{s} {n:,}" for s, n in sorted(statuses.items()))))
    findings.check("every execution reached a final state", stuck == 0,
                   f"stuck (queued or running after the drain): {stuck}")


def check_requests(findings, requests, executions, attempts, faults, reclaims=None):
    """Every request names a known run; a run's requests beyond its own recorded attempts
    (repeats, whatever attempt number they carry) are excused only by a lease taken back:
    ``reclaims`` ({execution id: take-backs}, the database's ``lease_reclaims``). With a
    schema that does not record take-backs (None), by a resending fault while the first
    copy was in flight, as before. ``attempts``: {"execution_id", "number",
    "response_status", "superseded"} (``superseded``: a superseded worker's attempt, kept as
    history: it does not count as the run's own)."""
    known = {str(e["id"]) for e in executions}
    unknown = sum(1 for r in requests if r["id"] not in known)
    findings.figures.append(("requests received by the target", f"{len(requests):,}"))
    findings.check("every request carries a known webhook-id", unknown == 0, f"unknown ids: {unknown}")

    arrivals = defaultdict(list)
    for r in requests:
        arrivals[r["id"]].append(r["at"])
    own = Counter(str(a["execution_id"]) for a in attempts if not a.get("superseded"))
    unexplained, excused, by_fault = 0, 0, Counter()
    for run_id, times in arrivals.items():
        times.sort()
        extra = len(times) - own[run_id] if own[run_id] else len(times) - 1
        if extra <= 0:
            continue
        allowed = extra if reclaims is None else min(extra, reclaims.get(run_id, 0))
        for repeat in times[-extra:]:
            fault = _fault_before(faults, times[0], repeat)
            if fault is not None:  # the fault table's column, whichever rule excuses it
                by_fault[fault["fault"]] += 1
                fault["repeats"] = fault.get("repeats", 0) + 1
                fault["last_repeat"] = max(fault.get("last_repeat", 0), repeat)
            if reclaims is None and fault is None:
                allowed -= 1
        excused += max(0, allowed)
        unexplained += extra - max(0, allowed)
    findings.tally["superseded"] = excused
    findings.tally["doubled"] = findings.tally.get("doubled", 0) + unexplained
    rule = ("a lease of it taken back (lease_reclaims)" if reclaims is not None
            else "a kill or restart while it was in flight (this schema records no take-backs)")
    detail = f"{excused + unexplained} requests beyond the runs' own attempts"
    if by_fault:
        detail += " (" + ", ".join(f"{n} after {f}" for f, n in by_fault.most_common()) + ")"
    findings.check(f"a run is sent again only after {rule}", unexplained == 0,
                   f"{detail}; excused: {excused}; unexplained: {unexplained}")

    received = {(r["id"], r["attempt"]) for r in requests}
    answered_not_received = sum(1 for a in attempts if a["response_status"] is not None and not a.get("superseded")
                                and (str(a["execution_id"]), str(a["number"])) not in received)
    findings.check("every recorded attempt that got an answer reached the target", answered_not_received == 0,
                   f"recorded with a response but never received: {answered_not_received}")


def check_early(findings, requests, executions):
    """No request reaches the target before its run's scheduled time. The target and
    PostgreSQL read the host's clock, so this is the database's clock, whatever clock a
    scheduler or worker believes (libfaketime)."""
    due = {str(e["id"]): e["scheduled_for"].timestamp() for e in executions}
    leads = [due[r["id"]] - r["at"] for r in requests if r["id"] in due and r["at"] < due[r["id"]]]
    findings.tally["early"] = len(leads)
    findings.check("nothing fires before it is due", not leads,
                   f"early requests: {len(leads)}" + (f" (up to {max(leads):.2f} s early)" if leads else ""))


def check_clock_faults(findings, faults, read_log):
    """A scheduler whose clock was skewed or jumped must have run while it was: logged its
    skew (apps/observability/clock.py) and claimed runs. A scheduler that hung (as one did
    when libfaketime faked its monotonic clock too) fires nothing early and proves nothing.
    ``read_log(process name, start, end)``: what it logged between two log offsets."""
    clock_faults = [f for f in faults if f["kind"] == "clock"]
    if not clock_faults:
        return
    idle = []
    for fault in clock_faults:
        text = read_log(fault["target"], fault.get("log_from", 0), fault.get("log_until"))
        saw_skew = "clock skew: this scheduler's clock is +" in text
        claimed = sum(int(n) for n in re.findall(r"scheduler tick: claimed=(\d+)", text))
        fault["claimed"] = claimed
        if not saw_skew or not claimed:
            idle.append(f"{fault['fault']} (skew logged: {'yes' if saw_skew else 'no'}, runs claimed: {claimed})")
    detail = "; ".join(idle) or ", ".join(f"{f['fault']}: {f['claimed']} runs claimed" for f in clock_faults)
    findings.check("a scheduler with a wrong clock saw its skew and went on claiming", not idle, detail)


def _fault_before(faults, first, repeat):
    """The first fault able to cause a resend that struck while the first copy was in
    flight (and before the repeat arrived), or None: an unexplained repeat."""
    candidates = [f for f in faults if f["kind"] in RESENDING_FAULTS
                  and first - IN_FLIGHT_BEFORE <= f["at"] <= min(repeat, first + IN_FLIGHT_AFTER)]
    return min(candidates, key=lambda f: f["at"]) if candidates else None


def check_usage(findings, usage_totals, attempt_count):
    """``usage_totals``: {counter name: total} (None when the platform meters nothing)."""
    if not usage_totals:
        findings.check("usage counters equal recorded attempts", True, "usage metering not present (skipped)")
        return
    ok = all(total == attempt_count for total in usage_totals.values())
    detail = ", ".join(f"{name}: {total:,}" for name, total in usage_totals.items())
    findings.check("usage counters equal recorded attempts", ok, f"{detail}; attempts: {attempt_count:,}")


def check_processes(findings, unexpected_exits, healthy):
    detail = "; ".join(f"{name} at t={t}s (code {code})" for name, t, code in unexpected_exits) or "none"
    findings.check("no process died on its own (no crash loop)", not unexpected_exits, f"unexpected exits: {detail}")
    findings.check("web answers /healthz after the chaos", healthy, "200" if healthy else "no answer")


def check_dead_letters(findings, sent, letters):
    """``sent``: poison messages the chaos pushed; ``letters``: the dead letters stored."""
    reasons = Counter(letter["reason"].partition(":")[0] for letter in letters)
    detail = ", ".join(f"{reason} {n}" for reason, n in sorted(reasons.items())) or "none"
    findings.check("every poison message was dead-lettered", len(letters) == sent,
                   f"pushed: {sent}, dead letters: {len(letters)} ({detail})")


def dispatch_lags(requests, executions):
    """(scheduled_for, lag seconds, arrival) per scheduled run: its first request's arrival
    at the target minus its scheduled time."""
    first = {}
    for r in requests:
        if r["attempt"] == "1" and (r["id"] not in first or r["at"] < first[r["id"]]):
            first[r["id"]] = r["at"]
    lags = []
    for e in executions:
        arrived = first.get(str(e["id"]))
        if arrived is not None and e["trigger"] == "schedule":
            scheduled = e["scheduled_for"].timestamp()
            lags.append((scheduled, arrived - scheduled, arrived))
    return lags


def lag_figures(findings, lags, faults, first_fault_at, end_at):
    baseline = sorted(lag for at, lag, _ in lags if at < first_fault_at) or [0.0]
    threshold = max(2.0, 2 * _pct(baseline, 99))
    starts = sorted(f["at"] for f in faults)
    for fault in faults:
        fault["recovery"] = _recovery(fault, lags, threshold, starts)
    windows = [(f["at"], f["at"] + max(f["recovery"], (f["until"] or f["at"]) - f["at"])) for f in faults]
    inside = sorted(lag for at, lag, _ in lags if any(a <= at <= b for a, b in windows))
    outside = sorted(lag for at, lag, _ in lags if not any(a <= at <= b for a, b in windows))
    for name, values in (("outside fault windows", outside), ("during fault windows", inside)):
        if values:
            findings.figures.append((f"dispatch lag {name} (p50 / p99 / max, {len(values):,} runs)",
                                     f"{_pct(values, 50):.3f} s / {_pct(values, 99):.3f} s / {values[-1]:.3f} s"))
    findings.figures.append(("a run counts as late (for recovery) above", f"{threshold:.2f} s"))


def _recovery(fault, lags, threshold, starts):
    """Seconds from the fault's start until the last run it delayed reached the target,
    and its repeats. A late run is the doing of the last fault that began before it
    arrived (and at most 10 s before it was due: in flight when it struck), so a run due
    just before the next fault and held up by that one is not billed to this one."""
    start = fault["at"]
    late = [arrived for at, lag, arrived in lags
            if lag > threshold and at >= start - 10 and _last_start_before(starts, arrived) == start]
    ends = [*late, fault.get("last_repeat", start), fault["until"] or start]
    return max(0.0, max(ends) - start)


def _last_start_before(starts, moment):
    before = [s for s in starts if s <= moment]
    return before[-1] if before else None


def _pct(values, p):
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1] if p < 100 else values[-1]


TALLY = ("lost", "doubled", "early", "superseded", "stuck")


def tally_line(findings):
    """lost / doubled / early / superseded / stuck, in one line for the summary."""
    return " / ".join(f"{name} {findings.tally.get(name, 0):,}" for name in TALLY)


def fault_rows(faults, started):
    rows = []
    for f in faults:
        rows.append((f"t={f['at'] - started:.1f}s", f["fault"],
                     f"{(f['until'] - f['at']):.1f} s" if f["until"] else "-",
                     f"{f.get('recovery', 0):.1f} s", str(f.get("repeats", 0))))
    return rows


def iso(value):
    return value.isoformat() if isinstance(value, datetime) else value
