"""Cron syntax forms, checked against calendar facts of 2027-2028 (all in UTC)."""

from datetime import datetime, timezone

import pytest

from cronsvc.schedules import CronSchedule, ScheduleError, next_run, next_runs, parse_schedule

UTC = timezone.utc


def Z(*args):
    return datetime(*args, tzinfo=UTC)


def days(expression, after, count):
    """The (month, day) of the next runs: these tests are about which days match."""
    return [(r.month, r.day) for r in next_runs(CronSchedule(expression), after, count)]


def test_last_day_of_month_handles_leap_years():
    assert days("0 0 L * *", Z(2027, 1, 5), 3) == [(1, 31), (2, 28), (3, 31)]
    assert days("0 0 L 2 *", Z(2027, 12, 1), 1) == [(2, 29)]  # 2028 is a leap year


def test_last_weekday_of_month():
    # 2027-07-31 is a Saturday -> Friday 30th; 2027-10-31 is a Sunday -> Friday 29th.
    assert days("0 0 LW 7,10 *", Z(2027, 1, 1), 2) == [(7, 30), (10, 29)]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("0 0 15W 5 *", (5, 14)),  # 2027-05-15 is a Saturday -> Friday
        ("0 0 15W 8 *", (8, 16)),  # 2027-08-15 is a Sunday -> Monday
        ("0 0 15W 9 *", (9, 15)),  # a Wednesday: itself
        ("0 0 1W 5 *", (5, 3)),  # 2027-05-01 is a Saturday; Friday would leave the month -> Monday 3rd
        ("0 0 31W 10 *", (10, 29)),  # 2027-10-31 is a Sunday; Monday would leave the month -> Friday 29th
    ],
)
def test_nearest_weekday(expression, expected):
    assert days(expression, Z(2027, 1, 1), 1) == [expected]


def test_nearest_weekday_beyond_month_end_does_not_match_that_month():
    assert days("0 0 31W * *", Z(2027, 4, 1), 1) == [(5, 31)]  # April has no 31st


@pytest.mark.parametrize("expression", ["0 0 * * 5L", "0 0 * * FRIL", "0 0 * * fril"])
def test_last_friday_of_month(expression):
    # January 2027 ends on a Sunday (31st): last Friday is the 29th; February 2027: 26th.
    assert days(expression, Z(2027, 1, 1), 2) == [(1, 29), (2, 26)]


def test_last_sunday_written_as_7L():
    assert days("0 0 * * 7L", Z(2027, 1, 1), 1) == [(1, 31)]


def test_nth_weekday():
    # 2027-01-01 is a Friday: Mondays are 4, 11, ...; March 2027 starts on a Monday.
    assert days("15 10 * * MON#2", Z(2027, 1, 1), 2) == [(1, 11), (2, 8)]
    assert days("0 0 * * 1#5", Z(2027, 1, 1), 1) == [(3, 29)]  # first month with five Mondays


def test_month_and_day_names_are_case_insensitive():
    assert days("0 0 1 jan,JUL *", Z(2027, 1, 2), 2) == [(7, 1), (1, 1)]
    assert days("0 9 * * mon-FRI", Z(2027, 1, 1), 3) == [(1, 1), (1, 4), (1, 5)]


def test_weekday_range_may_end_on_sunday_written_as_sun():
    assert days("0 0 * * FRI-SUN", Z(2027, 1, 4), 3) == [(1, 8), (1, 9), (1, 10)]


def test_sunday_is_0_and_7():
    assert days("0 0 * * 0", Z(2027, 1, 1), 2) == days("0 0 * * 7", Z(2027, 1, 1), 2) == [(1, 3), (1, 10)]


@pytest.mark.parametrize(
    ("expression", "minutes"),
    [
        ("5/20 * * * *", [5, 25, 45]),
        ("10-30/10 * * * *", [10, 20, 30]),
        ("*/20 * * * *", [20, 40, 0]),  # 00:00 itself is before `after`
        ("1,2,58-59 * * * *", [1, 2, 58, 59]),
    ],
)
def test_minute_steps_ranges_and_lists(expression, minutes):
    got = next_runs(CronSchedule(expression), Z(2027, 1, 1, 0, 0, 30), len(minutes))
    assert [r.minute for r in got] == minutes


@pytest.mark.parametrize(
    ("macro", "expected"),
    [
        ("@yearly", Z(2028, 1, 1)),
        ("@annually", Z(2028, 1, 1)),
        ("@monthly", Z(2027, 7, 1)),
        ("@weekly", Z(2027, 6, 20)),  # Sunday
        ("@daily", Z(2027, 6, 16)),
        ("@midnight", Z(2027, 6, 16)),
        ("@hourly", Z(2027, 6, 15, 13)),
        ("@HOURLY", Z(2027, 6, 15, 13)),
    ],
)
def test_macros(macro, expected):
    assert next_run(CronSchedule(macro), Z(2027, 6, 15, 12, 30)) == expected  # a Tuesday


def test_restricted_day_of_month_and_day_of_week_are_ored():
    # The 13th, and every Friday (2027-01-01 is a Friday).
    assert days("0 0 13 * FRI", Z(2026, 12, 31, 12), 5) == [(1, 1), (1, 8), (1, 13), (1, 15), (1, 22)]


def test_star_prefixed_day_field_makes_days_anded_like_vixie():
    # '*/2' starts with '*', so both must match: odd days that are Mondays.
    assert days("0 0 */2 * MON", Z(2027, 1, 1), 4) == [(1, 11), (1, 25), (2, 1), (2, 15)]


def test_leap_day_runs_every_four_years():
    assert next_runs(CronSchedule("0 0 29 2 *"), Z(2027, 1, 1), 2) == [Z(2028, 2, 29), Z(2032, 2, 29)]


@pytest.mark.parametrize("expression", ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 30W 2 *"])
def test_impossible_dates_have_no_next_run(expression):
    assert next_run(CronSchedule(expression), Z(2027, 1, 1)) is None


def test_extra_whitespace_is_normalised():
    assert parse_schedule({"type": "cron", "expression": "  0   3 * *\t*  "}).expression == "0 3 * * *"


@pytest.mark.parametrize(
    ("expression", "fragment"),
    [
        ("0 0 * * * *", "seconds"),
        ("0 0 0 * * * 2027", "7 field"),
        ("0 0 * *", "4 field"),
        ("@reboot", "boot"),
        ("@fortnightly", "unknown macro"),
        ("60 * * * *", "minute value 60 is out of range 0-59"),
        ("0 24 * * *", "hour value 24"),
        ("0 0 0 * *", "day-of-month value 0"),
        ("0 0 * 13 *", "month value 13"),
        ("0 0 * * 8", "day-of-week value 8"),
        ("*/0 * * * *", "step"),
        ("*/61 * * * *", "step"),
        ("5-1 * * * *", "starts after it ends"),
        ("0 0 * FOO *", "month name"),
        ("0 0 * * FUNDAY", "day name"),
        ("0 0 * * L", "'L'"),
        ("L * * * *", "not a number"),
        ("1,,2 * * * *", "empty list item"),
        ("0 0 * * MON#6", "1 to 5"),
        ("0 0 32W * *", "out of range"),
        ("0 0 1-5W * *", "not understood"),
        ("0 0 ? * *", "not a number"),
        ("", "empty"),
    ],
)
def test_invalid_expressions_say_what_is_wrong(expression, fragment):
    with pytest.raises(ScheduleError) as caught:
        parse_schedule({"type": "cron", "expression": expression or " "})
    error = caught.value
    if expression:
        assert error.code == "invalid_cron"
        assert fragment in error.message
    else:
        assert error.code == "invalid_schedule"
    assert error.field == "schedule.expression"
    assert error.message.startswith("schedule.expression: ")
