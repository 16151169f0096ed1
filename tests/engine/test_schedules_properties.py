"""Property tests: random valid expressions, timezones and instants against independent references.

Expressions are built field by field together with the set of values each field
means, so the references below never parse cron text: they only use those sets
and a per-day predicate written from the definitions (not the engine's per-month
tables). The brute-force reference walks UTC minute by minute and applies Vixie
cron's rules with zoneinfo's fold, independently of the engine's offset segments.
"""

import calendar
import itertools
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from functools import cache
from zoneinfo import ZoneInfo

from cronsim import CronSim
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronsvc.schedules import CronSchedule, min_gap_seconds, next_run, next_runs
from cronsvc.schedules.cron import compile_cron
from cronsvc.schedules.cron_runs import next_cron_ts
from cronsvc.schedules.localtime import timeline

UTC = timezone.utc
ZONES = [
    "UTC",
    "America/New_York",
    "Europe/London",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "America/Sao_Paulo",
    "Pacific/Chatham",  # +12:45 / +13:45
    "America/St_Johns",  # -03:30 / -02:30
]
MONTHS = "JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split()
DAYS = "SUN MON TUE WED THU FRI SAT".split()
MINUTE = timedelta(minutes=1)
SINGLE_VALUE_RANGE_STEP = re.compile(r"(?<!\d)(\d+)-(\d+)/")
PROPERTY_SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------- expressions with known meaning


@dataclass(frozen=True)
class Expr:
    minute: tuple  # (text, values)
    hour: tuple
    dom: tuple  # (text, items) items: ("set", values) | ("L",) | ("LW",) | ("W", n)
    month: tuple
    dow: tuple  # (text, items) items: ("set", values 0-6) | ("last", wd) | ("nth", wd, k)

    @property
    def text(self):
        return " ".join(f[0] for f in (self.minute, self.hour, self.dom, self.month, self.dow))

    @property
    def fixed_time(self):
        return not self.minute[0].startswith("*") and not self.hour[0].startswith("*")

    def matches_time(self, wall):
        return wall.minute in self.minute[1] and wall.hour in self.hour[1] and wall.month in self.month[1]

    def matches(self, wall):
        return self.matches_time(wall) and day_matches(self, wall.year, wall.month, wall.day)


def day_matches(expr, year, month, day):
    ndays = calendar.monthrange(year, month)[1]
    weekday = (date(year, month, day).weekday() + 1) % 7  # 0 = Sunday
    dom_ok = any(_dom_item(item, year, month, day, ndays) for item in expr.dom[1])
    dow_ok = any(_dow_item(item, weekday, day, ndays) for item in expr.dow[1])
    if expr.dom[0].startswith("*") or expr.dow[0].startswith("*"):
        return dom_ok and dow_ok
    return dom_ok or dow_ok


def _is_weekday(year, month, day):
    return date(year, month, day).weekday() < 5


def _dom_item(item, year, month, day, ndays):
    kind = item[0]
    if kind == "set":
        return day in item[1]
    if kind == "L":
        return day == ndays
    if kind == "LW":
        return day == max(d for d in range(ndays - 2, ndays + 1) if _is_weekday(year, month, d))
    wanted = item[1]
    if wanted > ndays or not _is_weekday(year, month, day):
        return False
    if _is_weekday(year, month, wanted):
        return day == wanted
    # the closest weekday inside the month; ties cannot happen (a weekend day has one weekday neighbour side)
    return all(
        abs(day - wanted) <= abs(d - wanted) for d in range(1, ndays + 1) if _is_weekday(year, month, d)
    )


def _dow_item(item, weekday, day, ndays):
    if item[0] == "set":
        return weekday in item[1]
    if item[0] == "last":
        return weekday == item[1] and day + 7 > ndays
    return weekday == item[1] and (day - 1) // 7 + 1 == item[2]


def _joined(parts):
    text = ",".join(p[0] for p in parts)
    values = set().union(*(p[1] for p in parts))
    return text, values


def plain_field(lo, hi, names=None, normalise=lambda v: v):
    def name(value, use_name):
        return names[normalise(value) - (1 if names is MONTHS else 0)] if names and use_name else str(value)

    single = st.tuples(st.integers(lo, hi), st.booleans()).map(lambda t: (name(*t), {normalise(t[0])}))
    span = st.tuples(st.integers(lo, hi), st.integers(lo, hi)).map(sorted)
    ranged = span.map(lambda ab: (f"{ab[0]}-{ab[1]}", {normalise(v) for v in range(ab[0], ab[1] + 1)}))
    steps = st.integers(1, min(30, hi - lo + 1))
    star_step = steps.map(lambda n: (f"*/{n}", {normalise(v) for v in range(lo, hi + 1, n)}))
    range_step = st.tuples(span, steps).map(
        lambda t: (f"{t[0][0]}-{t[0][1]}/{t[1]}", {normalise(v) for v in range(t[0][0], t[0][1] + 1, t[1])})
    )
    start_step = st.tuples(st.integers(lo, hi), steps).map(
        lambda t: (f"{t[0]}/{t[1]}", {normalise(v) for v in range(t[0], hi + 1, t[1])})
    )
    item = st.one_of(single, ranged, range_step, start_step)
    listed = st.lists(item, min_size=2, max_size=3).map(_joined)
    full = ("*", {normalise(v) for v in range(lo, hi + 1)})
    return st.one_of(st.just(full), star_step, item, listed)


# Besides arbitrary fields, favour the times DST transitions move (01:00-03:00 local in most zones).
minutes = st.one_of(
    plain_field(0, 59),
    st.sampled_from(
        [("0", {0}), ("30", {30}), ("0,30", {0, 30}), ("15,45", {15, 45}), ("*/15", {0, 15, 30, 45})]
    ),
)
hours = st.one_of(
    plain_field(0, 23),
    st.sampled_from(
        [
            ("1", {1}),
            ("2", {2}),
            ("1-3", {1, 2, 3}),
            ("0,2", {0, 2}),
            ("2,3", {2, 3}),
            ("*/2", set(range(0, 24, 2))),
        ]
    ),
)
months = st.one_of(st.just(("*", set(range(1, 13)))), plain_field(1, 12, MONTHS))


def _as_items(field):
    text, values = field
    return text, [("set", frozenset(values))]


dom_special = st.one_of(
    st.just(("L", [("L",)])),
    st.just(("LW", [("LW",)])),
    st.integers(1, 31).map(lambda n: (f"{n}W", [("W", n)])),
)
doms = st.one_of(
    plain_field(1, 31).map(_as_items),
    dom_special,
    st.tuples(plain_field(1, 31).map(_as_items), dom_special).map(
        lambda t: (f"{t[0][0]},{t[1][0]}", t[0][1] + t[1][1])
    ),
)
dow_special = st.one_of(
    st.tuples(st.integers(0, 7), st.booleans()).map(
        lambda t: (f"{DAYS[t[0] % 7] if t[1] else t[0]}L", [("last", t[0] % 7)])
    ),
    st.tuples(st.integers(0, 7), st.integers(1, 5)).map(
        lambda t: (f"{t[0]}#{t[1]}", [("nth", t[0] % 7, t[1])])
    ),
)
dows = st.one_of(plain_field(0, 7, DAYS, normalise=lambda v: v % 7).map(_as_items), dow_special)
# Mostly everyday expressions (so runs are frequent enough to compare), sometimes restricted days.
day_pairs = st.one_of(
    st.just((("*", [("set", frozenset(range(1, 32)))]), ("*", [("set", frozenset(range(7)))]))),
    st.tuples(doms, st.just(("*", [("set", frozenset(range(7)))]))),
    st.tuples(st.just(("*", [("set", frozenset(range(1, 32)))])), dows),
    st.tuples(doms, dows),
)
expressions = st.builds(
    lambda m, h, days, mo: Expr(m, h, days[0], mo, days[1]),
    minutes,
    hours,
    day_pairs,
    st.one_of(st.just(("*", set(range(1, 13)))), months),
)


@cache
def transitions(zone_name):
    """UTC instants in 2027-2028 at which the zone's offset changes (to the minute)."""
    zone = ZoneInfo(zone_name)
    found, t = [], datetime(2027, 1, 1, tzinfo=UTC)
    offset = t.astimezone(zone).utcoffset()
    while t.year < 2029:
        step = t + timedelta(hours=1)
        if step.astimezone(zone).utcoffset() != offset:
            while t.astimezone(zone).utcoffset() == offset:
                t += MINUTE
            found.append(t)
            offset = t.astimezone(zone).utcoffset()
        t = step if step > t else t + MINUTE
    return found


@st.composite
def instants(draw, zone_name):
    """Instants in 2027-2028, half of them within a day of a DST transition."""
    near = transitions(zone_name)
    if near and draw(st.booleans()):
        base = draw(st.sampled_from(near))
        return base + timedelta(seconds=draw(st.integers(-86400, 86400)))
    seconds = draw(st.integers(0, 2 * 366 * 86400 - 1))
    micro = draw(st.sampled_from([0, 1, 999_999, 500_000]))
    return datetime(2027, 1, 1, tzinfo=UTC) + timedelta(seconds=seconds, microseconds=micro)


cases = st.sampled_from(ZONES).flatmap(lambda z: st.tuples(expressions, st.just(z), instants(z)))

# Everyday expressions at the hours transitions move, asked within the day before a transition.
EVERY_DAY = (("*", [("set", frozenset(range(1, 32)))]), ("*", [("set", frozenset(range(7)))]))
transition_hours = st.sampled_from(
    [
        ("1", {1}),
        ("2", {2}),
        ("1-3", {1, 2, 3}),
        ("0,2", {0, 2}),
        ("2,3", {2, 3}),
        ("1,2", {1, 2}),
        ("*", set(range(24))),
    ]
)
transition_expressions = st.builds(
    lambda m, h: Expr(m, h, EVERY_DAY[0], ("*", set(range(1, 13))), EVERY_DAY[1]), minutes, transition_hours
)


@st.composite
def transition_cases(draw):
    zone_name = draw(st.sampled_from([z for z in ZONES if transitions(z)]))
    when = draw(st.sampled_from(transitions(zone_name)))
    after = when - timedelta(seconds=draw(st.integers(-3600, 26 * 3600)))
    return draw(transition_expressions), zone_name, after


# ---------------------------------------------------------------- the brute-force reference


def reference_runs(expr, zone_name, after, limit_minutes, count):
    """Vixie-cron runs strictly after ``after``, minute by minute over ``limit_minutes``."""
    zone = ZoneInfo(zone_name)
    t = after.astimezone(UTC).replace(second=0, microsecond=0) + MINUTE
    previous = (t - MINUTE).astimezone(zone)
    runs = []
    for _ in range(limit_minutes):
        local = t.astimezone(zone)
        if _runs_at(expr, local, previous):
            runs.append(t)
            if len(runs) == count:
                break
        previous, t = local, t + MINUTE
    return runs


def _runs_at(expr, local, previous):
    if expr.fixed_time and local.utcoffset() > previous.utcoffset():
        # clocks sprang forward at this minute: any matching skipped wall minute runs now
        wall = previous.replace(tzinfo=None) + MINUTE
        while wall < local.replace(tzinfo=None):
            if expr.matches(wall):
                return True
            wall += MINUTE
    if not expr.matches(local):
        return False
    return not (expr.fixed_time and local.fold == 1)  # fixed times run at the first occurrence only


def is_gap_run(expr, zone_name, run):
    zone = ZoneInfo(zone_name)
    return expr.fixed_time and _runs_at(expr, run.astimezone(zone), (run - MINUTE).astimezone(zone))


# ---------------------------------------------------------------- properties


@PROPERTY_SETTINGS
@given(cases)
def test_runs_are_strictly_increasing_and_match_the_expression(case):
    expr, zone_name, after = case
    zone = ZoneInfo(zone_name)
    runs = next_runs(CronSchedule(expr.text, zone_name), after, 12)
    assert all(r.tzinfo is UTC for r in runs)
    assert all(a < b for a, b in zip([after, *runs], runs))  # > after, increasing, so no duplicates
    for run in runs:
        local = run.astimezone(zone)
        assert run.second == 0 and run.microsecond == 0
        if expr.matches(local):
            assert not (expr.fixed_time and local.fold == 1), "fixed-time job ran in the repeated hour"
        else:
            assert is_gap_run(expr, zone_name, run), f"{local} does not match {expr.text}"


@PROPERTY_SETTINGS
@given(cases)
def test_agrees_with_brute_force_reference(case):
    expr, zone_name, after = case
    window = 3 * 1440
    expected = reference_runs(expr, zone_name, after, window, 4)
    got = next_runs(CronSchedule(expr.text, zone_name), after, len(expected) + 1)
    assert got[: len(expected)] == expected
    if len(expected) < 4:  # the reference ran out of window: the engine's next run lies beyond it
        horizon = after.replace(second=0, microsecond=0) + MINUTE * (window + 1)
        assert len(got) == len(expected) or got[len(expected)] >= horizon


@PROPERTY_SETTINGS
@given(transition_cases())
def test_agrees_with_brute_force_reference_around_dst_transitions(case):
    expr, zone_name, after = case
    expected = reference_runs(expr, zone_name, after, 2 * 1440, 6)
    assert next_runs(CronSchedule(expr.text, zone_name), after, len(expected)) == expected


@settings(max_examples=80, deadline=None)
@given(expressions, st.sampled_from(["UTC", "Asia/Kolkata", "Asia/Tokyo"]), instants("UTC"))
def test_agrees_with_cronsim_where_cronsim_understands_the_expression(expr, zone_name, after):
    if "W" in expr.dom[0] or any(ch.isalpha() for ch in expr.dow[0].replace("L", "")):
        return  # cronsim lacks W and names before L
    if any(a == b for a, b in SINGLE_VALUE_RANGE_STEP.findall(expr.text)):
        return  # cronsim reads '5-5/10' as '5/10' (5, 15, ...); Vixie cron and we read it as 5
    iterator = CronSim(expr.text, after.astimezone(ZoneInfo(zone_name)))
    expected = [
        run.astimezone(UTC) for run in itertools.islice(iterator, 3)
    ]  # cronsim stops after 50 empty years
    assert next_runs(CronSchedule(expr.text, zone_name), after, 3) == expected


@settings(max_examples=60, deadline=None)
@given(cases)
def test_min_gap_equals_smallest_gap_between_enumerated_runs(case):
    expr, zone_name, after = case
    schedule = CronSchedule(expr.text, zone_name)
    horizon = after + timedelta(days=3)
    runs = next_runs(schedule, after, 3 * 1440 + 2, end_at=horizon)
    gaps = [int((b - a).total_seconds()) for a, b in zip(runs, runs[1:])]
    assert min_gap_seconds(schedule, after=after, horizon_days=3) == (min(gaps) if gaps else None)


@settings(max_examples=60, deadline=None)
@given(cases, st.lists(st.integers(0, 59), min_size=1, max_size=5))
def test_per_minute_memo_matches_direct_search(case, seconds):
    expr, zone_name, after = case
    spec, zone = compile_cron(expr.text), timeline(zone_name)
    base = after.replace(second=0, microsecond=0)
    for second in seconds:
        at = base + timedelta(seconds=second)
        direct = next_cron_ts(spec, zone, int(at.timestamp()))
        got = next_run(CronSchedule(expr.text, zone_name), at)
        assert (got and int(got.timestamp())) == direct
