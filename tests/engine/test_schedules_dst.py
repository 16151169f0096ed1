"""DST behaviour of cron schedules, with expected instants worked out by hand.

Transitions used (all verifiable in the tz database):
  America/New_York  2027-03-14 02:00 EST -> 03:00 EDT (07:00Z); 2027-11-07 02:00 EDT -> 01:00 EST (06:00Z)
                    2028-03-12 (07:00Z);                        2028-11-05 (06:00Z)
  Europe/London     2027-03-28 01:00 GMT -> 02:00 BST (01:00Z); 2027-10-31 02:00 BST -> 01:00 GMT (01:00Z)
  Australia/Lord_Howe (+10:30 standard, +11:00 summer: a 30-minute shift)
                    2027-04-04 02:00 -> 01:30 (2027-04-03 15:00Z); 2027-10-03 02:00 -> 02:30 (2027-10-02 15:30Z)
                    2028-04-02 02:00 -> 01:30 (2028-04-01 15:00Z); 2028-10-01 02:00 -> 02:30 (2028-09-30 15:30Z)
  Asia/Kolkata      +05:30 all year, no DST.
"""

from datetime import datetime, timedelta, timezone

import pytest

from cronsvc.schedules import CronSchedule, next_run, next_runs

UTC = timezone.utc
NY, LONDON, LORD_HOWE, KOLKATA = "America/New_York", "Europe/London", "Australia/Lord_Howe", "Asia/Kolkata"


def Z(*args):
    return datetime(*args, tzinfo=UTC)


def runs(expression, zone, after, count):
    return next_runs(CronSchedule(expression, zone), after, count)


CASES = [
    # --- fixed-time job in the spring-forward gap: once, at the first instant after the gap
    pytest.param(
        "30 2 * * *",
        NY,
        Z(2027, 3, 13),
        [Z(2027, 3, 13, 7, 30), Z(2027, 3, 14, 7, 0), Z(2027, 3, 15, 6, 30)],
        id="ny-spring-0230-runs-at-0300-edt",
    ),
    pytest.param(
        "30 2 * * *",
        NY,
        Z(2028, 3, 11),
        [Z(2028, 3, 11, 7, 30), Z(2028, 3, 12, 7, 0), Z(2028, 3, 13, 6, 30)],
        id="ny-spring-2028",
    ),
    # several gap-hitting times collapse into one run
    pytest.param(
        "0,30 2 * * *",
        NY,
        Z(2027, 3, 13),
        [Z(2027, 3, 13, 7, 0), Z(2027, 3, 13, 7, 30), Z(2027, 3, 14, 7, 0), Z(2027, 3, 15, 6, 0)],
        id="ny-spring-two-gap-times-one-run",
    ),
    # 02:00 moves to 03:00, which is also a run: still one run at 03:00
    pytest.param(
        "0 2,3 * * *",
        NY,
        Z(2027, 3, 14),
        [Z(2027, 3, 14, 7, 0), Z(2027, 3, 15, 6, 0), Z(2027, 3, 15, 7, 0)],
        id="ny-spring-gap-time-and-gap-end-one-run",
    ),
    pytest.param(
        "0 1-3 * * *",
        NY,
        Z(2027, 3, 14),
        [Z(2027, 3, 14, 6, 0), Z(2027, 3, 14, 7, 0), Z(2027, 3, 15, 5, 0)],
        id="ny-spring-range-is-fixed-time",
    ),
    # --- fixed-time job in the repeated hour: once, at the first occurrence
    pytest.param(
        "30 1 * * *",
        NY,
        Z(2027, 11, 6),
        [Z(2027, 11, 6, 5, 30), Z(2027, 11, 7, 5, 30), Z(2027, 11, 8, 6, 30)],
        id="ny-fall-0130-once-edt",
    ),
    pytest.param(
        "30 1 * * *",
        NY,
        Z(2028, 11, 4),
        [Z(2028, 11, 4, 5, 30), Z(2028, 11, 5, 5, 30), Z(2028, 11, 6, 6, 30)],
        id="ny-fall-2028",
    ),
    pytest.param(
        "0 1-3 * * *",
        NY,
        Z(2027, 11, 7),
        [Z(2027, 11, 7, 5, 0), Z(2027, 11, 7, 7, 0), Z(2027, 11, 7, 8, 0), Z(2027, 11, 8, 6, 0)],
        id="ny-fall-range-is-fixed-time",
    ),
    pytest.param(
        "0 1,13 * * *",
        NY,
        Z(2027, 11, 7),
        [Z(2027, 11, 7, 5, 0), Z(2027, 11, 7, 18, 0), Z(2027, 11, 8, 6, 0)],
        id="ny-fall-list-is-fixed-time",
    ),
    # --- wildcard jobs follow the real clock
    pytest.param(
        "0 * * * *",
        NY,
        Z(2027, 11, 7, 3, 30),
        [Z(2027, 11, 7, 4), Z(2027, 11, 7, 5), Z(2027, 11, 7, 6), Z(2027, 11, 7, 7), Z(2027, 11, 7, 8)],
        id="ny-fall-hourly-twice-in-repeated-hour",
    ),
    pytest.param(
        "@hourly",
        NY,
        Z(2027, 3, 14, 4, 30),
        [Z(2027, 3, 14, 5), Z(2027, 3, 14, 6), Z(2027, 3, 14, 7), Z(2027, 3, 14, 8)],
        id="ny-spring-hourly-never-in-skipped-hour",
    ),
    pytest.param(
        "*/15 1 * * *",
        NY,
        Z(2027, 11, 7),
        [Z(2027, 11, 7, 5, m) for m in (0, 15, 30, 45)]
        + [Z(2027, 11, 7, 6, m) for m in (0, 15, 30, 45)]
        + [Z(2027, 11, 8, 6, 0)],
        id="ny-fall-every-15-in-hour-1-runs-eight-times",
    ),
    pytest.param(
        "*/30 2 * * *",
        NY,
        Z(2027, 3, 13, 7, 30),
        [Z(2027, 3, 15, 6, 0), Z(2027, 3, 15, 6, 30)],
        id="ny-spring-wildcard-minute-skips-missing-hour",
    ),
    # --- Europe/London (transitions at 01:00 UTC)
    pytest.param(
        "30 1 * * *",
        LONDON,
        Z(2027, 3, 27),
        [Z(2027, 3, 27, 1, 30), Z(2027, 3, 28, 1, 0), Z(2027, 3, 29, 0, 30)],
        id="london-spring-0130-runs-at-0200-bst",
    ),
    pytest.param(
        "30 1 * * *",
        LONDON,
        Z(2027, 10, 30),
        [Z(2027, 10, 30, 0, 30), Z(2027, 10, 31, 0, 30), Z(2027, 11, 1, 1, 30)],
        id="london-fall-0130-once-bst",
    ),
    pytest.param(
        "*/20 1 * * *",
        LONDON,
        Z(2027, 10, 30, 23),
        [Z(2027, 10, 31, 0, m) for m in (0, 20, 40)]
        + [Z(2027, 10, 31, 1, m) for m in (0, 20, 40)]
        + [Z(2027, 11, 1, 1, 0)],
        id="london-fall-wildcard-six-runs",
    ),
    pytest.param(
        "0 * * * *",
        LONDON,
        Z(2028, 3, 25, 23, 30),
        [Z(2028, 3, 26, 0), Z(2028, 3, 26, 1), Z(2028, 3, 26, 2)],
        id="london-spring-2028-hourly",
    ),
    # --- Australia/Lord_Howe: 30-minute shifts
    pytest.param(
        "15 2 * * *",
        LORD_HOWE,
        Z(2027, 10, 1),
        [Z(2027, 10, 1, 15, 45), Z(2027, 10, 2, 15, 30), Z(2027, 10, 3, 15, 15)],
        id="lordhowe-spring-0215-runs-at-0230",
    ),
    pytest.param(
        "0,15,30,45 2 * * *",
        LORD_HOWE,
        Z(2027, 10, 2, 15),
        [Z(2027, 10, 2, 15, 30), Z(2027, 10, 2, 15, 45), Z(2027, 10, 3, 15, 0)],
        id="lordhowe-spring-gap-times-collapse-with-0230",
    ),
    pytest.param(
        "15 2 * * *",
        LORD_HOWE,
        Z(2028, 9, 29),
        [Z(2028, 9, 29, 15, 45), Z(2028, 9, 30, 15, 30), Z(2028, 10, 1, 15, 15)],
        id="lordhowe-spring-2028",
    ),
    pytest.param(
        "45 1 * * *",
        LORD_HOWE,
        Z(2027, 4, 2),
        [Z(2027, 4, 2, 14, 45), Z(2027, 4, 3, 14, 45), Z(2027, 4, 4, 15, 15)],
        id="lordhowe-fall-0145-once-at-first",
    ),
    pytest.param(
        "*/15 1 * * *",
        LORD_HOWE,
        Z(2027, 4, 3, 13),
        [Z(2027, 4, 3, 14, m) for m in (0, 15, 30, 45)]
        + [Z(2027, 4, 3, 15, 0), Z(2027, 4, 3, 15, 15)]
        + [Z(2027, 4, 4, 14, 30)],
        id="lordhowe-fall-wildcard-repeats-half-hour",
    ),
    pytest.param(
        "0 * * * *",
        LORD_HOWE,
        Z(2027, 10, 2, 13),
        [Z(2027, 10, 2, 13, 30), Z(2027, 10, 2, 14, 30), Z(2027, 10, 2, 16, 0), Z(2027, 10, 2, 17, 0)],
        id="lordhowe-spring-hourly-skips-0200",
    ),
    pytest.param(
        "45 1 * * *",
        LORD_HOWE,
        Z(2028, 4, 1),
        [Z(2028, 4, 1, 14, 45), Z(2028, 4, 2, 15, 15)],
        id="lordhowe-fall-2028",
    ),
    # --- Asia/Kolkata: no DST, +05:30
    pytest.param(
        "30 2 * * *",
        KOLKATA,
        Z(2027, 3, 13),
        [Z(2027, 3, 13, 21, 0), Z(2027, 3, 14, 21, 0)],
        id="kolkata-no-dst",
    ),
    pytest.param(
        "0 * * * *",
        KOLKATA,
        Z(2028, 11, 5, 5),
        [Z(2028, 11, 5, 5, 30), Z(2028, 11, 5, 6, 30)],
        id="kolkata-hourly",
    ),
]


@pytest.mark.parametrize(("expression", "zone", "after", "expected"), CASES)
def test_dst_runs(expression, zone, after, expected):
    assert runs(expression, zone, after, len(expected)) == expected


def test_fall_back_second_occurrence_is_skipped_even_when_asked_from_inside_it():
    # 01:10 EST on 2027-11-07 (06:10Z), inside the repeated hour: 01:30 EST must not run.
    assert next_run(CronSchedule("30 1 * * *", NY), Z(2027, 11, 7, 6, 10)) == Z(2027, 11, 8, 6, 30)


def test_wildcard_asked_from_first_pass_of_repeated_hour_gets_second_pass():
    # 01:50 EDT (05:50Z): the next `*/15 1` run is 01:00 EST (06:00Z), an earlier wall time.
    assert next_run(CronSchedule("*/15 1 * * *", NY), Z(2027, 11, 7, 5, 50)) == Z(2027, 11, 7, 6, 0)


def test_gap_run_is_not_repeated_when_asked_again_from_it():
    schedule = CronSchedule("0,30 2 * * *", NY)
    assert next_run(schedule, Z(2027, 3, 14, 6, 59, 59)) == Z(2027, 3, 14, 7, 0)
    assert next_run(schedule, Z(2027, 3, 14, 7, 0)) == Z(2027, 3, 15, 6, 0)


def test_every_minute_through_both_transitions_is_regular_real_time():
    schedule = CronSchedule("* * * * *", NY)
    for start in (Z(2027, 3, 14, 6, 30), Z(2027, 11, 7, 5, 30)):
        got = next_runs(schedule, start, 120)
        assert got == [start + timedelta(minutes=i) for i in range(1, 121)]


def test_after_in_any_timezone_is_accepted():
    fixed_minus_five = datetime(2027, 3, 14, 2, 59, tzinfo=timezone(timedelta(hours=-5)))  # = 07:59Z
    assert next_run(CronSchedule("0 * * * *", NY), fixed_minus_five) == Z(2027, 3, 14, 8, 0)
