"""parse_schedule / schedule_to_dict, interval and once schedules, windows, validation, jitter, describe."""

import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from cronsvc.schedules import (
    CronSchedule,
    IntervalSchedule,
    OnceSchedule,
    ScheduleError,
    describe,
    jitter_offset,
    min_gap_seconds,
    next_run,
    next_runs,
    parse_schedule,
    schedule_to_dict,
    validate_schedule,
)

UTC = timezone.utc
NOW = datetime(2027, 1, 1, tzinfo=UTC)
REPO = Path(__file__).resolve().parents[2]


def Z(*args, **kwargs):
    return datetime(*args, tzinfo=UTC, **kwargs)


def raises(code, field, fn, *args, **kwargs):
    with pytest.raises(ScheduleError) as caught:
        fn(*args, **kwargs)
    assert (caught.value.code, caught.value.field) == (code, field), caught.value.message
    assert caught.value.message.startswith(field)  # messages name the field first
    return caught.value


# ---------------------------------------------------------------- parse / to_dict


def test_parse_cron_with_and_without_timezone():
    assert parse_schedule(
        {"type": "cron", "expression": "0 3 * * *", "timezone": "Europe/Berlin"}
    ) == CronSchedule("0 3 * * *", "Europe/Berlin")
    assert parse_schedule(
        {"type": "cron", "expression": "@daily"}, default_timezone="Asia/Tokyo"
    ) == CronSchedule("@daily", "Asia/Tokyo")


def test_parse_interval_anchor_comes_from_data_then_argument_then_epoch():
    start = Z(2027, 5, 1, 12)
    assert parse_schedule({"type": "interval", "seconds": 300}, anchor=start).anchor == start
    data = {"type": "interval", "seconds": 300, "anchor": "2027-02-01T00:00:00+01:00"}
    assert parse_schedule(data, anchor=start).anchor == Z(2027, 1, 31, 23)
    assert parse_schedule({"type": "interval", "seconds": 300}).anchor == Z(1970, 1, 1)


def test_parse_once_converts_offsets_to_utc():
    schedule = parse_schedule({"type": "once", "at": "2027-01-01T09:30:00+05:30", "timezone": "Asia/Kolkata"})
    assert schedule == OnceSchedule(Z(2027, 1, 1, 4), "Asia/Kolkata")
    assert schedule.at.tzinfo is UTC


@pytest.mark.parametrize(
    "schedule",
    [
        CronSchedule("15 10 * * MON#2", "Australia/Lord_Howe"),
        IntervalSchedule(90, Z(2027, 1, 1, 0, 0, 7, 250000), "Europe/London"),
        OnceSchedule(Z(2027, 1, 1), "UTC"),
    ],
)
def test_schedule_to_dict_round_trips(schedule):
    data = schedule_to_dict(schedule)
    assert parse_schedule(data) == schedule
    for key in ("at", "anchor"):
        if key in data:
            assert data[key].endswith("Z")


def test_schedule_to_dict_shapes():
    assert schedule_to_dict(OnceSchedule(Z(2027, 1, 1))) == {
        "type": "once",
        "at": "2027-01-01T00:00:00Z",
        "timezone": "UTC",
    }
    assert schedule_to_dict(IntervalSchedule(300, Z(2027, 1, 1))) == {
        "type": "interval",
        "seconds": 300,
        "anchor": "2027-01-01T00:00:00Z",
        "timezone": "UTC",
    }


@pytest.mark.parametrize(
    ("data", "code", "field"),
    [
        ("0 3 * * *", "invalid_schedule", "schedule"),
        ({}, "invalid_schedule", "schedule.type"),
        ({"type": "weekly"}, "invalid_schedule", "schedule.type"),
        ({"type": "cron"}, "invalid_schedule", "schedule.expression"),
        ({"type": "cron", "expression": 5}, "invalid_schedule", "schedule.expression"),
        ({"type": "cron", "expression": "0 3 * * *", "seconds": 5}, "invalid_schedule", "schedule.seconds"),
        ({"type": "cron", "expression": "0 3 * * * *"}, "invalid_cron", "schedule.expression"),
        (
            {"type": "cron", "expression": "0 3 * * *", "timezone": "Mars/Olympus"},
            "unknown_timezone",
            "schedule.timezone",
        ),
        (
            {"type": "cron", "expression": "0 3 * * *", "timezone": ""},
            "unknown_timezone",
            "schedule.timezone",
        ),
        (
            {"type": "cron", "expression": "0 3 * * *", "timezone": "../../etc/passwd"},
            "unknown_timezone",
            "schedule.timezone",
        ),
        ({"type": "interval"}, "invalid_schedule", "schedule.seconds"),
        ({"type": "interval", "seconds": 0}, "invalid_schedule", "schedule.seconds"),
        ({"type": "interval", "seconds": -60}, "invalid_schedule", "schedule.seconds"),
        ({"type": "interval", "seconds": "300"}, "invalid_schedule", "schedule.seconds"),
        ({"type": "interval", "seconds": True}, "invalid_schedule", "schedule.seconds"),
        ({"type": "interval", "seconds": 1.5}, "invalid_schedule", "schedule.seconds"),
        ({"type": "interval", "seconds": 400 * 86400}, "invalid_schedule", "schedule.seconds"),
        (
            {"type": "interval", "seconds": 60, "anchor": "2027-01-01T00:00:00"},
            "invalid_schedule",
            "schedule.anchor",
        ),
        ({"type": "once"}, "invalid_schedule", "schedule.at"),
        ({"type": "once", "at": "2027-01-01T00:00:00"}, "invalid_schedule", "schedule.at"),
        ({"type": "once", "at": "2027-01-01"}, "invalid_schedule", "schedule.at"),
        ({"type": "once", "at": "tomorrow"}, "invalid_schedule", "schedule.at"),
        (
            {"type": "once", "at": "2027-01-01T00:00:00Z", "expression": "x"},
            "invalid_schedule",
            "schedule.expression",
        ),
    ],
)
def test_parse_schedule_errors(data, code, field):
    raises(code, field, parse_schedule, data)


def test_parse_accepts_integral_float_seconds():
    assert parse_schedule({"type": "interval", "seconds": 300.0}).seconds == 300


def test_error_as_dict():
    error = raises(
        "invalid_cron", "schedule.expression", parse_schedule, {"type": "cron", "expression": "@reboot"}
    )
    assert error.as_dict() == {
        "code": "invalid_cron",
        "field": "schedule.expression",
        "message": error.message,
    }
    assert isinstance(error, ValueError)


# ---------------------------------------------------------------- interval and once


def test_interval_runs_on_the_anchor_grid():
    schedule = IntervalSchedule(300, Z(2027, 1, 1, 0, 0, 7))
    assert next_run(schedule, Z(2027, 6, 15, 12, 34, 56, 789000)) == Z(2027, 6, 15, 12, 35, 7)
    assert next_run(schedule, Z(2027, 6, 15, 12, 35, 7)) == Z(2027, 6, 15, 12, 40, 7)  # strictly after


def test_interval_never_drifts_however_late_the_previous_dispatch_was():
    schedule = IntervalSchedule(7, Z(2027, 1, 1, 0, 0, 0, 123456))
    after = Z(2027, 1, 1)
    for late_by in (0, 1, 3, 6, 13, 100_000):
        after = next_run(schedule, after + timedelta(seconds=late_by))
        assert (after - schedule.anchor) % timedelta(seconds=7) == timedelta(0)
    far = next_run(schedule, Z(2031, 7, 4, 3, 2, 1))
    assert (far - schedule.anchor) % timedelta(seconds=7) == timedelta(0)
    assert timedelta(0) < far - Z(2031, 7, 4, 3, 2, 1) <= timedelta(seconds=7)


def test_interval_with_anchor_in_the_future_first_runs_at_the_anchor():
    schedule = IntervalSchedule(3600, Z(2027, 3, 1, 9, 30))
    assert next_runs(schedule, Z(2027, 1, 1), 2) == [Z(2027, 3, 1, 9, 30), Z(2027, 3, 1, 10, 30)]


def test_default_epoch_anchor_puts_runs_on_round_times():
    schedule = parse_schedule({"type": "interval", "seconds": 300})
    assert next_run(schedule, Z(2027, 1, 1, 10, 2, 11)) == Z(2027, 1, 1, 10, 5)


def test_interval_ignores_dst():
    schedule = IntervalSchedule(3600, Z(2027, 1, 1), "America/New_York")
    assert next_runs(schedule, Z(2027, 3, 14, 5, 30), 3) == [
        Z(2027, 3, 14, 6),
        Z(2027, 3, 14, 7),
        Z(2027, 3, 14, 8),
    ]


def test_once_runs_once():
    schedule = OnceSchedule(Z(2027, 1, 1, 12))
    assert next_run(schedule, Z(2027, 1, 1)) == Z(2027, 1, 1, 12)
    assert next_run(schedule, Z(2027, 1, 1, 12)) is None
    assert next_runs(schedule, Z(2026, 1, 1), 5) == [Z(2027, 1, 1, 12)]


# ---------------------------------------------------------------- windows


def test_window_start_is_inclusive_and_end_is_inclusive():
    schedule = CronSchedule("0 3 * * *")
    got = next_runs(schedule, Z(2027, 1, 1), 10, start_at=Z(2027, 3, 1, 3), end_at=Z(2027, 3, 3, 3))
    assert got == [Z(2027, 3, 1, 3), Z(2027, 3, 2, 3), Z(2027, 3, 3, 3)]


def test_window_start_before_after_changes_nothing():
    schedule = CronSchedule("0 3 * * *")
    assert next_run(schedule, Z(2027, 3, 5), start_at=Z(2027, 3, 1, 3)) == Z(2027, 3, 5, 3)


def test_window_end_passed_means_no_run():
    assert next_run(CronSchedule("* * * * *"), Z(2027, 1, 1), end_at=Z(2026, 12, 31)) is None


def test_interval_window_start_off_grid_takes_next_grid_point():
    schedule = IntervalSchedule(600, Z(2027, 1, 1))
    assert next_run(schedule, Z(2027, 1, 1), start_at=Z(2027, 1, 2, 0, 1)) == Z(2027, 1, 2, 0, 10)
    assert next_run(schedule, Z(2027, 1, 1), start_at=Z(2027, 1, 2, 0, 10)) == Z(2027, 1, 2, 0, 10)


def test_once_outside_window_never_runs():
    schedule = OnceSchedule(Z(2027, 6, 1))
    assert next_run(schedule, NOW, start_at=Z(2027, 7, 1)) is None
    assert next_run(schedule, NOW, end_at=Z(2027, 5, 1)) is None
    assert next_run(schedule, NOW, start_at=Z(2027, 6, 1), end_at=Z(2027, 6, 1)) == Z(2027, 6, 1)


def test_naive_after_is_refused():
    with pytest.raises(ValueError, match="timezone-aware"):
        next_run(CronSchedule("* * * * *"), datetime(2027, 1, 1))


# ---------------------------------------------------------------- validate_schedule


def validate(schedule, **kwargs):
    kwargs.setdefault("now", NOW)
    kwargs.setdefault("min_interval_seconds", 60)
    validate_schedule(schedule, **kwargs)


def test_valid_schedules_pass():
    validate(CronSchedule("*/5 * * * *", "Europe/Berlin"), min_interval_seconds=300)
    validate(IntervalSchedule(300, NOW), min_interval_seconds=300)
    validate(OnceSchedule(Z(2027, 1, 2)), start_at=Z(2027, 1, 1), end_at=Z(2027, 2, 1))


def test_never_fires_expression():
    raises("never_fires", "schedule.expression", validate, CronSchedule("0 0 30 2 *"))


def test_never_fires_in_window():
    schedule = CronSchedule("0 3 * * *")
    error = raises(
        "never_fires", "end_at", validate, schedule, start_at=Z(2027, 1, 1, 4), end_at=Z(2027, 1, 1, 5)
    )
    assert "2027-01-01T04:00:00Z" in error.message
    raises("never_fires", "end_at", validate, CronSchedule("0 0 1 1 *"), end_at=Z(2027, 12, 31))


def test_once_before_window_never_fires():
    raises("never_fires", "start_at", validate, OnceSchedule(Z(2027, 1, 5)), start_at=Z(2027, 2, 1))


def test_interval_too_short():
    error = raises("interval_too_short", "schedule.seconds", validate, IntervalSchedule(30, NOW))
    assert "30 seconds" in error.message and "1 minute" in error.message


def test_cron_too_frequent_names_smallest_gap_and_plan_minimum():
    error = raises(
        "interval_too_short",
        "schedule.expression",
        validate,
        CronSchedule("*/5 * * * *"),
        min_interval_seconds=600,
    )
    assert "5 minutes" in error.message and "10 minutes" in error.message


def test_cron_too_frequent_only_across_dst_is_caught_in_the_weeks_before():
    # 01:50 EST and 03:10 EDT on 2027-03-14 are 20 real minutes apart; otherwise gaps are >= 40 minutes.
    schedule = CronSchedule("10,50 1,3 * * *", "America/New_York")
    error = raises(
        "interval_too_short",
        "schedule.expression",
        validate,
        schedule,
        now=Z(2027, 3, 1),
        min_interval_seconds=1800,
    )
    assert "20 minutes" in error.message
    validate(schedule, now=Z(2027, 4, 1), min_interval_seconds=1800)


def test_invalid_window():
    raises(
        "invalid_window",
        "end_at",
        validate,
        CronSchedule("@daily"),
        start_at=Z(2027, 2, 1),
        end_at=Z(2027, 2, 1),
    )
    raises(
        "invalid_window",
        "end_at",
        validate,
        CronSchedule("@daily"),
        start_at=Z(2027, 2, 1),
        end_at=Z(2027, 1, 1),
    )


def test_in_the_past():
    raises("in_the_past", "schedule.at", validate, OnceSchedule(NOW))
    raises("in_the_past", "schedule.at", validate, OnceSchedule(Z(2026, 6, 1)))


def test_validate_reports_bad_expression_and_timezone_of_hand_built_schedules():
    raises("invalid_cron", "schedule.expression", validate, CronSchedule("61 * * * *"))
    raises("unknown_timezone", "schedule.timezone", validate, CronSchedule("@daily", "Nowhere/Special"))


# ---------------------------------------------------------------- min_gap_seconds


@pytest.mark.parametrize(
    ("schedule", "after", "expected"),
    [
        (CronSchedule("*/5 * * * *"), NOW, 300),
        (CronSchedule("* * * * *", "America/New_York"), NOW, 60),
        (CronSchedule("0 3 * * *"), NOW, 86400),
        (CronSchedule("0 9 * * MON"), NOW, 7 * 86400),
        (CronSchedule("0 9,17 * * 1-5"), NOW, 8 * 3600),
        (CronSchedule("0 3 * * *", "America/New_York"), Z(2027, 3, 1), 23 * 3600),  # spring-forward night
        (CronSchedule("0 1,2 * * *", "America/New_York"), Z(2027, 10, 20), 3600),
        (CronSchedule("30 1 * * *", "Australia/Lord_Howe"), Z(2027, 9, 20), 86400 - 1800),
        (CronSchedule("0 0 1 1 *"), Z(2027, 12, 1), None),  # one run in the horizon
        (IntervalSchedule(450, NOW), NOW, 450),
        (OnceSchedule(Z(2027, 2, 1)), NOW, None),
    ],
)
def test_min_gap_seconds(schedule, after, expected):
    assert min_gap_seconds(schedule, after=after) == expected


def test_min_gap_of_fall_back_wildcard_is_regular():
    # */15 keeps 15-minute real gaps through the repeated hour.
    assert min_gap_seconds(CronSchedule("*/15 * * * *", "Europe/London"), after=Z(2027, 10, 25)) == 900


# ---------------------------------------------------------------- jitter


def test_jitter_is_in_range_and_spread():
    offsets = [jitter_offset(f"job-{i}", 60) for i in range(1000)]
    assert all(0 <= o < 60 for o in offsets)
    assert len(set(offsets)) == 60


def test_jitter_without_window_is_zero():
    assert jitter_offset("job-1", 0) == 0


def test_jitter_is_the_same_in_another_process():
    here = [jitter_offset(f"job-{i}", 3600) for i in range(5)]
    code = "from cronsvc.schedules import jitter_offset; print([jitter_offset(f'job-{i}', 3600) for i in range(5)])"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={"PYTHONHASHSEED": "12345", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == str(here)


# ---------------------------------------------------------------- describe


@pytest.mark.parametrize(
    ("schedule", "text"),
    [
        (CronSchedule("0 3 * * 1-5", "Europe/Berlin"), "At 03:00, Monday through Friday (Europe/Berlin)"),
        (CronSchedule("@daily"), "At 00:00 (UTC)"),
        (CronSchedule("*/5 * * * *"), "Every 5 minutes (UTC)"),
        (CronSchedule("0 9 * * FRIL"), "At 09:00, on the last Friday of the month (UTC)"),
        (CronSchedule("0 9 1,15 * MON"), "At 09:00, on day 1 and 15 of the month, or on Monday (UTC)"),
        (IntervalSchedule(300, NOW), "Every 5 minutes"),
        (IntervalSchedule(3600, NOW), "Every hour"),
        (IntervalSchedule(90, NOW), "Every 90 seconds"),
        (IntervalSchedule(2 * 86400, NOW), "Every 2 days"),
        (OnceSchedule(Z(2027, 1, 1)), "Once at 2027-01-01 00:00 (UTC)"),
        (OnceSchedule(Z(2027, 1, 1), "Europe/Berlin"), "Once at 2027-01-01 01:00 (Europe/Berlin)"),
    ],
)
def test_describe(schedule, text):
    assert describe(schedule) == text


def test_instants_outside_the_supported_years_never_crash():
    from datetime import datetime, timezone as tz

    from cronsvc.schedules import CronSchedule, IntervalSchedule, next_run

    cron = CronSchedule("0 * * * *", "America/New_York")
    assert next_run(cron, datetime(1, 1, 1, tzinfo=tz.utc)) == datetime(1970, 1, 1, 0, 0, tzinfo=tz.utc)
    assert next_run(cron, datetime(9999, 12, 31, 23, tzinfo=tz.utc)) is None
    interval = IntervalSchedule(60, anchor=datetime(1, 1, 1, tzinfo=tz.utc))
    assert next_run(interval, datetime(1, 1, 1, tzinfo=tz.utc)) == datetime(1970, 1, 1, 0, 0, tzinfo=tz.utc)
