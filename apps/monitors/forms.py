"""The monitor form of the pages <-> the API's JSON shape, so MonitorSerializer (the API's
rules) validates both."""

from apps.api.errors import flatten
from cronsvc.schedules.localtime import zone_name

NON_FIELD = "__all__"
FIELDS = ("name", "project", "schedule_type", "cron_expression", "interval_seconds", "timezone", "grace_seconds")
#: API error path -> the form field that shows it
API_PATH_TO_FIELD = {
    "name": "name", "project": "project", "grace_seconds": "grace_seconds", "schedule.type": "schedule_type",
    "schedule.expression": "cron_expression", "schedule.seconds": "interval_seconds",
    "schedule.timezone": "timezone", "schedule": "schedule_type",
}


def monitor_data(post):
    """The API request body the posted form stands for."""
    values = posted_values(post)
    schedule = {"type": values["schedule_type"], "timezone": zone_name(values["timezone"]) or None}
    if values["schedule_type"] == "cron":
        schedule["expression"] = values["cron_expression"]
    else:
        seconds = values["interval_seconds"]
        schedule["seconds"] = int(seconds) if seconds.isdigit() else seconds or None  # the API wants a number
    if schedule["timezone"] is None:
        del schedule["timezone"]
    return {"name": values["name"], "project": values["project"] or None, "schedule": schedule,
            "grace_seconds": values["grace_seconds"] or None}


def grace_seconds(post):
    """The grace period typed, or None when it is no whole number of seconds yet."""
    value = post.get("grace_seconds", "").strip()
    return int(value) if value.isdigit() else None


def posted_values(post):
    return {name: post.get(name, "").strip() for name in FIELDS}


def form_values(monitor):
    return {"name": monitor.name, "project": str(monitor.project_id), "schedule_type": monitor.schedule_type,
            "cron_expression": monitor.cron_expression, "interval_seconds": monitor.interval_seconds or "",
            "timezone": monitor.timezone, "grace_seconds": monitor.grace_seconds}


def default_values(project):
    return {"name": "", "project": str(project.pk) if project else "", "schedule_type": "cron",
            "cron_expression": "0 3 * * *", "interval_seconds": 3600,
            "timezone": getattr(project, "timezone", "") or "UTC", "grace_seconds": 3600}


def form_errors(detail):
    """DRF error details -> {form field: [messages]}."""
    errors = {}
    for path, messages in flatten(detail).items():
        field = API_PATH_TO_FIELD.get(path, NON_FIELD)
        errors.setdefault(field, []).extend(str(message) for message in messages)
    return errors
