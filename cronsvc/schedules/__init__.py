"""Schedule math for cronsvc: cron / interval / once schedules, timezones and DST.

Free of Django: the scheduler, the models and the REST API all call these functions.
See docs/schedules.md for the semantics (Vixie cron DST rules, windows, anchors).
"""

from .crontab_import import CrontabImport, CrontabLineError, ImportedJob, parse_crontab
from .describe import describe
from .errors import ScheduleError
from .jitter import jitter_offset
from .model import CronSchedule, IntervalSchedule, OnceSchedule, Schedule
from .parse import parse_schedule, schedule_to_dict
from .runs import next_run, next_runs
from .validate import min_gap_seconds, validate_schedule

__all__ = [
    "CronSchedule",
    "CrontabImport",
    "CrontabLineError",
    "ImportedJob",
    "IntervalSchedule",
    "OnceSchedule",
    "Schedule",
    "ScheduleError",
    "describe",
    "jitter_offset",
    "min_gap_seconds",
    "next_run",
    "next_runs",
    "parse_crontab",
    "parse_schedule",
    "schedule_to_dict",
    "validate_schedule",
]
