"""When a monitor expects its next ping: the schedule engine (cronsvc.schedules) applied to
a Monitor row. Pure functions of their arguments (time is a parameter)."""

from datetime import timedelta
from functools import lru_cache

from cronsvc.schedules import CronSchedule, next_run


@lru_cache(maxsize=4096)
def _cron(expression, zone):
    return CronSchedule(expression=expression, timezone=zone)


def next_expected(schedule_type, cron_expression, interval_seconds, zone, after):
    """The first time after ``after`` (a ping) when the next ping is due.

    A cron monitor expects the schedule's next occurrence; an interval monitor expects a ping
    ``interval_seconds`` after the last one (a period, as Healthchecks counts it: pings that
    arrive a little late do not shift every later deadline onto a fixed grid)."""
    if schedule_type == "cron":
        return next_run(_cron(cron_expression, zone), after)
    return after + timedelta(seconds=interval_seconds)


def deadline(expected, grace_seconds):
    return None if expected is None else expected + timedelta(seconds=grace_seconds)


def describe_monitor(monitor):
    from cronsvc.schedules import describe
    from cronsvc.schedules.describe import format_duration

    if monitor.schedule_type == "cron":
        return describe(_cron(monitor.cron_expression, monitor.timezone))
    return f"every {format_duration(monitor.interval_seconds, singular_bare=True)}"
