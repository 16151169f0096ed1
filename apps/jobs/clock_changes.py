"""Runs of a schedule as the pages list them: each in its timezone, with the daylight-saving
changes between two runs marked (the job form's and the monitor form's previews, a job's
next runs)."""

from zoneinfo import ZoneInfo

from django.templatetags.tz import do_timezone


def mark_clock_changes(runs, zone_name, now):
    """Each run in its timezone; ``change`` says when the UTC offset differs from the one
    before it (a daylight-saving change between the two)."""
    zone = ZoneInfo(zone_name)
    previous = now.astimezone(zone).utcoffset()
    marked = []
    for run in runs:
        local = run.astimezone(zone)
        offset = local.utcoffset()
        change = None
        if offset != previous:
            change = f"Clock change: UTC{_offset(previous)} → UTC{_offset(offset)}"
        # |timezone's datetime: templates show it in its own zone, not converted back to UTC.
        marked.append({"at": run, "local": do_timezone(run, zone), "tzname": local.tzname(), "change": change})
        previous = offset
    return marked


def _offset(delta):
    minutes = int(delta.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "−"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
