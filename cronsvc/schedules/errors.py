"""The one exception the schedule engine raises for input a customer can get wrong."""

from __future__ import annotations


class ScheduleError(ValueError):
    """A schedule (or crontab) a customer sent cannot be accepted.

    ``code`` is machine-readable and stable (the API returns it), ``field`` is the
    dotted path of the offending input (e.g. ``schedule.expression``), ``message``
    is for a person: it names the field and says what to do.
    """

    CODES = frozenset(
        {
            "invalid_cron",
            "unknown_timezone",
            "never_fires",
            "interval_too_short",
            "invalid_window",
            "in_the_past",
            "invalid_schedule",
            "crontab_too_large",
            # execution windows and blackouts (window_parse.py)
            "invalid_windows",
            "invalid_weekday",
            "invalid_window_time",
            "window_end_before_start",
            "overlapping_windows",
            "too_many_windows",
            "invalid_blackout",
            "blackout_end_before_start",
            "too_many_blackouts",
        }
    )

    def __init__(self, code: str, field: str, message: str) -> None:
        if code not in self.CODES:
            raise AssertionError(f"unknown ScheduleError code {code!r}")
        super().__init__(message)
        self.code = code
        self.field = field
        self.message = message

    def as_dict(self) -> dict[str, str]:
        """The error as the API reports it."""
        return {"code": self.code, "field": self.field, "message": self.message}

    def __repr__(self) -> str:
        return f"ScheduleError({self.code!r}, {self.field!r}, {self.message!r})"
