"""Execution windows and blackouts (cronsvc.schedules.windows), as plain function calls.

Transitions used: America/New_York 2027-03-14 02:00 EST -> 03:00 EDT (07:00Z) and
2027-11-07 02:00 EDT -> 01:00 EST (06:00Z); Europe/Berlin 2027-03-28 02:00 CET -> 03:00
CEST (01:00Z).
"""

from datetime import date, datetime, time, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cronsvc.schedules import ScheduleError
from cronsvc.schedules.window_parse import parse_blackouts, parse_run_windows, parse_windows
from cronsvc.schedules.windows import Blackout, RunWindows, Window, is_open, next_opening

UTC = timezone.utc
NY, BERLIN = "America/New_York", "Europe/Berlin"
WEEKDAYS = ["mon", "tue", "wed", "thu", "fri"]


def Z(*args):
    return datetime(*args, tzinfo=UTC)


def rules(windows=(), blackouts=(), zone="UTC"):
    return parse_run_windows(list(windows), list(blackouts), zone)


OFFICE = rules([{"days": WEEKDAYS, "start": "08:00", "end": "18:00"}], zone=BERLIN)


# --- is_open ---------------------------------------------------------------------------

@pytest.mark.parametrize("instant, expected", [
    (Z(2027, 6, 7, 6, 0), True),     # Monday 08:00 CEST: the window opens
    (Z(2027, 6, 7, 5, 59), False),   # 07:59 local
    (Z(2027, 6, 7, 15, 59), True),   # 17:59 local
    (Z(2027, 6, 7, 16, 0), False),   # 18:00 local: closed (end excluded)
    (Z(2027, 6, 12, 10, 0), False),  # Saturday
    (Z(2027, 1, 4, 7, 0), True),     # Monday 08:00 CET (winter offset)
    (Z(2027, 1, 4, 6, 59), False),
])
def test_office_hours_in_the_jobs_timezone(instant, expected):
    assert is_open(OFFICE, instant) is expected


def test_overnight_window_spans_midnight_into_the_next_day():
    night = rules([{"days": ["fri"], "start": "22:00", "end": "06:00", "overnight": True}])
    assert is_open(night, Z(2027, 6, 11, 22, 0))       # Friday 22:00
    assert is_open(night, Z(2027, 6, 12, 5, 59))       # Saturday 05:59, carried over
    assert not is_open(night, Z(2027, 6, 12, 6, 0))
    assert not is_open(night, Z(2027, 6, 12, 22, 30))  # Saturday night: not a window day
    assert not is_open(night, Z(2027, 6, 11, 5, 0))    # Friday morning belongs to Thursday's night


def test_sunday_overnight_window_runs_into_monday():
    night = rules([{"days": ["sun"], "start": "23:00", "end": "01:00", "overnight": True}])
    assert is_open(night, Z(2027, 6, 14, 0, 30))  # Monday 00:30


def test_blackout_dates_are_local_days_of_the_jobs_timezone():
    closed = rules(blackouts=[{"start": "2027-12-24", "end": "2027-12-26"}], zone=NY)
    assert is_open(closed, Z(2027, 12, 24, 4, 59))      # 23:59 on the 23rd in New York
    assert not is_open(closed, Z(2027, 12, 24, 5, 0))   # 00:00 on the 24th in New York
    assert not is_open(closed, Z(2027, 12, 27, 4, 59))  # 23:59 on the 26th
    assert is_open(closed, Z(2027, 12, 27, 5, 0))


def test_spring_forward_window_is_open_until_the_clocks_jump():
    # 01:00-03:00 in New York on 2027-03-14: 01:00 EST (06:00Z) to the jump at 07:00Z.
    early = rules([{"days": ["sun"], "start": "01:00", "end": "03:00"}], zone=NY)
    assert not is_open(early, Z(2027, 3, 14, 5, 59))
    assert is_open(early, Z(2027, 3, 14, 6, 0))
    assert is_open(early, Z(2027, 3, 14, 6, 59, 59))
    assert not is_open(early, Z(2027, 3, 14, 7, 0))  # 03:00 EDT


def test_fall_back_repeated_hour_is_open_both_times():
    early = rules([{"days": ["sun"], "start": "01:00", "end": "02:00"}], zone=NY)
    assert is_open(early, Z(2027, 11, 7, 5, 30))  # 01:30 EDT
    assert is_open(early, Z(2027, 11, 7, 6, 30))  # 01:30 EST, an hour later
    assert not is_open(early, Z(2027, 11, 7, 7, 0))  # 02:00 EST


# --- next_opening ----------------------------------------------------------------------

def test_next_opening_of_an_open_instant_is_itself():
    assert next_opening(OFFICE, Z(2027, 6, 7, 9, 0)) == Z(2027, 6, 7, 9, 0)


def test_next_opening_after_friday_evening_is_monday_morning():
    assert next_opening(OFFICE, Z(2027, 6, 11, 17, 0)) == Z(2027, 6, 14, 6, 0)


def test_next_opening_skips_blackout_days():
    office = rules([{"days": WEEKDAYS, "start": "08:00", "end": "18:00"}],
                   [{"start": "2027-12-24", "end": "2027-12-28"}], zone=BERLIN)
    # Thursday 23rd, 19:00: the 24th (Fri) and 27th/28th (Mon/Tue) are blacked out.
    assert next_opening(office, Z(2027, 12, 23, 18, 0)) == Z(2027, 12, 29, 7, 0)


def test_next_opening_after_a_blackout_inside_an_overnight_window_is_midnight():
    night = rules([{"days": WEEKDAYS, "start": "22:00", "end": "06:00", "overnight": True}],
                  [{"start": "2027-06-08", "end": "2027-06-08"}])
    # Tuesday the 8th is blacked out; Tuesday night's window carries into Wednesday 00:00.
    assert next_opening(night, Z(2027, 6, 8, 12, 0)) == Z(2027, 6, 9, 0, 0)


def test_next_opening_in_a_spring_forward_gap_is_the_jump():
    # A window opening at 02:30, which does not exist on 2027-03-14 in New York: it opens
    # at the first instant after the gap (03:00 EDT = 07:00Z), like cron's rule.
    gap = rules([{"days": ["sun"], "start": "02:30", "end": "04:00"}], zone=NY)
    assert next_opening(gap, Z(2027, 3, 14, 5, 0)) == Z(2027, 3, 14, 7, 0)


def test_next_opening_in_the_fall_back_repeat_is_the_second_pass():
    early = rules([{"days": ["sun"], "start": "01:30", "end": "01:45"}], zone=NY)
    # After the first 01:45 (EDT, 05:45Z) the clocks fall back; 01:30 EST is 06:30Z.
    assert next_opening(early, Z(2027, 11, 7, 5, 50)) == Z(2027, 11, 7, 6, 30)


def test_only_blackouts_open_at_the_midnight_after_them():
    closed = rules(blackouts=[{"start": "2027-03-28", "end": "2027-03-28"}], zone=BERLIN)
    assert next_opening(closed, Z(2027, 3, 28, 12, 0)) == Z(2027, 3, 28, 22, 0)  # 00:00 CEST


# --- properties --------------------------------------------------------------------------

window_st = st.builds(
    lambda days, start, length: {"days": days, "start": f"{start // 60:02d}:{start % 60:02d}",
                                 "end": f"{(start + length) % 1440 // 60:02d}:{(start + length) % 60:02d}",
                                 "overnight": start + length >= 1440},
    st.lists(st.sampled_from(WEEKDAYS + ["sat", "sun"]), min_size=1, max_size=7, unique=True),
    st.integers(0, 1439), st.integers(1, 1440))
zones = st.sampled_from(["UTC", NY, BERLIN, "Australia/Lord_Howe", "Asia/Kolkata"])
instants = st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2029, 12, 31)).map(
    lambda d: d.replace(tzinfo=UTC))


@settings(max_examples=150, deadline=None)
@given(window_st, zones, instants)
def test_next_opening_is_open_and_nothing_before_it_is(window, zone, after):
    try:
        found = rules([window], zone=zone)
    except ScheduleError:
        return  # e.g. a 24-hour window on consecutive days overlapping itself
    opening = next_opening(found, after)
    assert opening is not None and opening >= after
    assert is_open(found, opening)
    # Closed just before (when it is not ``after`` itself), checked minute by minute back.
    if opening > after:
        step = opening - timedelta(seconds=1)
        while step > max(after, opening - timedelta(hours=3)):
            assert not is_open(found, step)
            step -= timedelta(minutes=7)


# --- parsing and its errors ------------------------------------------------------------

@pytest.mark.parametrize("windows, code, field", [
    ([{"days": ["mon", "funday"], "start": "08:00", "end": "18:00"}], "invalid_weekday", "windows.0.days.1"),
    ([{"days": [], "start": "08:00", "end": "18:00"}], "invalid_weekday", "windows.0.days"),
    ([{"days": ["mon"], "start": "8am", "end": "18:00"}], "invalid_window_time", "windows.0.start"),
    ([{"days": ["mon"], "start": "08:00", "end": "24:00"}], "invalid_window_time", "windows.0.end"),
    ([{"days": ["mon"], "start": "18:00", "end": "08:00"}], "window_end_before_start", "windows.0.end"),
    ([{"days": ["mon"], "start": "08:00", "end": "08:00"}], "window_end_before_start", "windows.0.end"),
    ([{"days": ["mon"], "start": "08:00", "end": "09:00", "overnight": True}], "invalid_windows",
     "windows.0.overnight"),
    ([{"days": ["mon"], "start": "08:00", "end": "12:00"}, {"days": ["tue", "mon"], "start": "11:00", "end": "13:00"}],
     "overlapping_windows", "windows.1"),
    ([{"days": ["sun"], "start": "22:00", "end": "02:00", "overnight": True},
      {"days": ["mon"], "start": "01:00", "end": "03:00"}], "overlapping_windows", "windows.1"),
    ([{"days": ["mon"], "start": f"{h:02d}:00", "end": f"{h:02d}:30"} for h in range(15)], "too_many_windows",
     "windows"),
    ({"days": ["mon"]}, "invalid_windows", "windows"),
    ([{"days": ["mon"], "start": "08:00", "end": "09:00", "from": "x"}], "invalid_windows", "windows.0.from"),
])
def test_bad_windows_are_refused_with_a_stable_code_and_path(windows, code, field):
    with pytest.raises(ScheduleError) as caught:
        parse_windows(windows)
    assert (caught.value.code, caught.value.field) == (code, field)
    assert caught.value.message.startswith(field)


@pytest.mark.parametrize("blackouts, code, field", [
    ([{"start": "2027-12-26", "end": "2027-12-24"}], "blackout_end_before_start", "blackouts.0.end"),
    ([{"start": "2027-13-01"}], "invalid_blackout", "blackouts.0.start"),
    ([{"start": "2027-12-24", "until": "2027-12-26"}], "invalid_blackout", "blackouts.0.until"),
    ([{"start": "2027-01-01"}] * 51, "too_many_blackouts", "blackouts"),
])
def test_bad_blackouts_are_refused(blackouts, code, field):
    with pytest.raises(ScheduleError) as caught:
        parse_blackouts(blackouts)
    assert (caught.value.code, caught.value.field) == (code, field)


def test_adjacent_windows_and_full_day_names_are_accepted():
    windows = parse_windows([{"days": ["Monday", "tue"], "start": "08:00", "end": "12:00"},
                             {"days": ["mon"], "start": "12:00", "end": "18:00"}])
    assert windows[0] == Window(frozenset({0, 1}), time(8), time(12))
    assert parse_blackouts([{"start": "2027-12-24"}]) == (Blackout(date(2027, 12, 24), date(2027, 12, 24)),)
    assert RunWindows((), ()).windows == ()
