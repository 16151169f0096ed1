"""The job form of the web pages, as a translation to and from the API's job shape.

The pages do not validate jobs themselves: ``job_data`` turns the posted form into the
dict that JobSerializer takes (the body of POST /api/v1/jobs/), the serializer runs the
same validation as the API, and ``form_errors`` puts its messages beside the fields.
``form_values`` goes the other way, from a saved job to the form's values.

The form carries both kinds' fields (the request and the script); ``kind`` decides which
block goes to the API, so it works without JavaScript, which only hides the other block.
"""

from datetime import datetime
from zoneinfo import ZoneInfo

from apps.api.errors import flatten
from cronsvc.schedules.localtime import load_zone, zone_name

from .models import Job
from .serializers import MASK

# Form field <- API path (the longest matching prefix wins).
API_PATH_TO_FIELD = {
    "project": "project", "name": "name", "description": "description", "tags": "tags",
    "schedule": "schedule_mode", "schedule.type": "schedule_mode",
    "schedule.expression": "cron_expression", "schedule.seconds": "every_n", "schedule.at": "once_at",
    "schedule.timezone": "timezone", "schedule.anchor": "start_at", "timezone": "timezone",
    "start_at": "start_at", "end_at": "end_at", "jitter_seconds": "jitter_seconds",
    "request": "url", "request.url": "url", "request.method": "method", "request.headers": "headers",
    "request.body": "body", "request.body_format": "body_format",
    "request.timeout_seconds": "timeout_seconds", "request.follow_redirects": "follow_redirects",
    "request.connect_timeout_seconds": "connect_timeout_seconds", "rate_limit_per_minute": "rate_limit_per_minute",
    "request.auth": "auth_type", "request.auth.type": "auth_type", "request.auth.username": "auth_username",
    "request.auth.password": "auth_password", "request.auth.token": "auth_token",
    "retry": "max_attempts", "retry.max_attempts": "max_attempts",
    "retry.initial_delay_seconds": "retry_initial_delay_seconds",
    "retry.max_delay_seconds": "retry_max_delay_seconds", "retry.multiplier": "retry_multiplier",
    "retry.retry_on_timeout": "retry_on_timeout",
    "success": "success_status_codes", "success.status_codes": "success_status_codes",
    "success.body_contains": "success_body_contains", "success.body_regex": "success_body_regex",
    "misfire_policy": "misfire_policy", "misfire_grace_seconds": "misfire_grace_seconds",
    "overlap_policy": "overlap_policy", "region": "region",
    "dependencies": "dependencies", "dependency_mode": "dependency_mode",
    "windows": "windows", "blackouts": "blackouts", "outside_window": "outside_window", "priority": "priority",
    "kind": "kind", "script": "script_source", "script.language": "script_language",
    "script.source": "script_source", "script.env": "script_env",
    "script.allow_network": "script_allow_network",
}
# What the pages call a job's stored field (the job form's labels), e.g. on its versions;
# a field not named here shows its model name with a capital (label_of).
FIELD_LABELS = {
    "schedule_type": "Schedule", "cron_expression": "Cron expression", "interval_seconds": "Interval",
    "run_at": "Run once at", "jitter_seconds": "Jitter (seconds)", "dependency_mode": "Runs after",
    "script_language": "Script language", "script_source": "Script", "script_env": "Script environment",
    "script_allow_network": "Script network access", "url": "URL", "headers": "Headers",
    "auth": "Authentication", "secret_headers": "Secret headers", "timeout_seconds": "Timeout (seconds)",
    "success_status_codes": "Success status codes", "success_body_contains": "Success: body contains",
    "success_body_regex": "Success: body matches", "max_attempts": "Attempts",
    "retry_initial_delay_seconds": "First retry delay (s)", "retry_max_delay_seconds": "Longest retry delay (s)",
    "retry_multiplier": "Backoff multiplier", "retry_on_timeout": "Retry after a timeout",
    "misfire_policy": "When runs were missed", "misfire_grace_seconds": "Give up on a missed run after (s)",
    "overlap_policy": "If the previous run is still going", "rate_limit_per_minute": "Rate limit (per minute)",
    "windows": "Execution windows", "blackouts": "Blackout dates", "outside_window": "Outside the windows",
    "dependencies": "Upstream jobs",
}
UNITS = {"seconds": 1, "minutes": 60, "hours": 3600}
LOCAL_FORMAT = "%Y-%m-%dT%H:%M"
NON_FIELD = "__all__"


def default_values(project=None):
    """The form of a new job: the model's defaults, in the project's timezone."""
    job = Job(project=project, timezone=getattr(project, "timezone", "UTC"))
    values = form_values(job)
    values.update(project=str(project.pk) if project else "", cron_expression="0 * * * *")
    return values


def form_values(job):
    """A job as the form shows it. Secrets are never put back in the page."""
    auth = job.auth or {}
    schedule_mode, every_n, every_unit = "cron", "", "minutes"
    if job.schedule_type == Job.ScheduleType.INTERVAL:
        schedule_mode = "every"
        seconds = job.interval_seconds or 0
        every_unit = next((unit for unit in ("hours", "minutes") if seconds and seconds % UNITS[unit] == 0),
                          "seconds")
        every_n = str(seconds // UNITS[every_unit]) if seconds else ""
    elif job.schedule_type == Job.ScheduleType.ONCE:
        schedule_mode = "once"
    elif job.schedule_type == Job.ScheduleType.NONE:
        schedule_mode = "none"
    return {
        "project": str(job.project_id or ""),
        "name": job.name, "description": job.description, "tags": ", ".join(job.tags or []),
        "schedule_mode": schedule_mode, "cron_expression": job.cron_expression,
        "every_n": every_n, "every_unit": every_unit,
        "once_at": _local(job.run_at, job.timezone), "timezone": job.timezone,
        "start_at": _local(job.start_at, job.timezone), "end_at": _local(job.end_at, job.timezone),
        "jitter_seconds": str(job.jitter_seconds),
        "method": job.method, "url": job.url, "headers": _shown_headers(job),
        "body": job.body, "body_format": job.body_format,
        "auth_type": auth.get("type", "none"), "auth_username": auth.get("username", ""),
        "auth_password": "", "auth_token": "", "auth_stored": bool(auth),
        "timeout_seconds": str(job.timeout_seconds), "follow_redirects": job.follow_redirects,
        "max_attempts": str(job.max_attempts),
        "retry_initial_delay_seconds": str(job.retry_initial_delay_seconds),
        "retry_max_delay_seconds": str(job.retry_max_delay_seconds),
        "retry_multiplier": _number(job.retry_multiplier), "retry_on_timeout": job.retry_on_timeout,
        "success_status_codes": job.success_status_codes,
        "success_body_contains": job.success_body_contains, "success_body_regex": job.success_body_regex,
        "misfire_policy": job.misfire_policy, "misfire_grace_seconds": str(job.misfire_grace_seconds),
        "overlap_policy": job.overlap_policy, "region": job.region,
        "dependency_mode": job.dependency_mode, "dependencies": _dependency_rows_of(job),
        "windows": windows_text(job.windows), "blackouts": blackouts_text(job.blackouts),
        "outside_window": job.outside_window, "priority": job.priority,
        "connect_timeout_seconds": _number(job.connect_timeout_seconds) if job.connect_timeout_seconds else "",
        "rate_limit_per_minute": str(job.rate_limit_per_minute or ""),
        "kind": job.kind, "script_language": job.script_language or Job.ScriptLanguage.PYTHON,
        "script_source": job.script_source, "script_env": [(name, MASK) for name in job.script_env or {}],
        "script_allow_network": job.script_allow_network,
    }


def _dependency_rows_of(job):
    if job._state.adding:
        return []
    return [(str(link.upstream_id), link.on) for link in job.upstream_links.order_by("id")]


def _shown_headers(job):
    """Secret headers (stored encrypted) are shown as the mask; posted back, it keeps them."""
    from .serializers import MASK

    return [*(job.headers or {}).items(), *((name, MASK) for name in (job.secret_headers or {}))]


def posted_values(post, *, stored_auth=None):
    """The form's values as posted (to show the form again with its errors)."""
    values = {name: post.get(name, "") for name in API_PATH_TO_FIELD.values()}
    values.update(
        every_unit=post.get("every_unit", "minutes"), headers=_header_rows(post),
        follow_redirects=_checked(post, "follow_redirects"), retry_on_timeout=_checked(post, "retry_on_timeout"),
        auth_type=post.get("auth_type", "none"), auth_stored=bool(stored_auth),
        auth_password="", auth_token="",  # a secret typed in is not echoed back into the page
        dependencies=_dependency_rows(post), dependency_mode=post.get("dependency_mode", "all"),
        kind=post.get("kind") or Job.Kind.HTTP, script_env=_env_rows(post),
        script_allow_network=_checked(post, "script_allow_network"),
    )
    return values


def label_of(name):
    """The label a person reads for the job's stored field ``name``."""
    return FIELD_LABELS.get(name) or name.replace("_", " ").capitalize()


def job_data(post, *, stored_auth=None, regions=()):
    """The posted form as the body of POST /api/v1/jobs/ (a PUT when editing).

    Values that do not parse are passed on as given, so the serializer refuses them with
    the API's own message. ``stored_auth``: the job's saved credentials; a secret left
    empty keeps the stored one (sent as the API's mask)."""
    zone = zone_name(post.get("timezone", "").strip())
    data = {
        "project": post.get("project", ""),
        "name": post.get("name", "").strip(),
        "description": post.get("description", ""),
        "tags": [tag.strip() for tag in post.get("tags", "").split(",") if tag.strip()],
        "schedule": _schedule(post, zone),
        "start_at": local_instant(post.get("start_at", ""), zone),
        "end_at": local_instant(post.get("end_at", ""), zone),
        "jitter_seconds": _int(post.get("jitter_seconds", ""), 0),
        "kind": post.get("kind") or Job.Kind.HTTP,
        "retry": {
            "max_attempts": _int(post.get("max_attempts", ""), 3),
            "initial_delay_seconds": _int(post.get("retry_initial_delay_seconds", ""), 10),
            "max_delay_seconds": _int(post.get("retry_max_delay_seconds", ""), 3600),
            "multiplier": _float(post.get("retry_multiplier", ""), 2.0),
            "retry_on_timeout": _checked(post, "retry_on_timeout"),
        },
        "success": {
            "status_codes": post.get("success_status_codes", "").strip() or "200-299",
            "body_contains": post.get("success_body_contains", ""),
            "body_regex": post.get("success_body_regex", ""),
        },
        "misfire_policy": post.get("misfire_policy") or Job.MisfirePolicy.RUN_ONCE,
        "misfire_grace_seconds": _int(post.get("misfire_grace_seconds", ""), 3600),
        "overlap_policy": post.get("overlap_policy") or Job.OverlapPolicy.ALLOW,
        "dependencies": [{"job": upstream, "on": on} for upstream, on in _dependency_rows(post)],
        "dependency_mode": post.get("dependency_mode") or Job.DependencyMode.ALL,
        "windows": windows_from_text(post.get("windows", "")),
        "blackouts": blackouts_from_text(post.get("blackouts", "")),
        "outside_window": post.get("outside_window") or Job.OutsideWindow.SKIP,
        "priority": post.get("priority") or Job.Priority.NORMAL,
        "rate_limit_per_minute": _int(post.get("rate_limit_per_minute", ""), None),
    }
    if regions:
        data["region"] = post.get("region", "")
    if data["kind"] == Job.Kind.SCRIPT:
        data["script"] = _script(post)
    else:  # an unknown kind too: the serializer refuses it, and the request is checked beside it
        data["request"] = _request(post, stored_auth)
    return data


def schedule_data(post):
    """Only the schedule part of the form (for the live preview)."""
    return _schedule(post, zone_name(post.get("timezone", "").strip()))


def form_errors(detail):
    """DRF error details (or the API's flat ``fields``) -> {form field: [messages]}.

    The messages are the API's, less the ``path: `` prefix the field's label replaces."""
    flat = flatten(detail)
    errors = {}
    for path, messages in flat.items():
        field = field_for(path)
        for message in messages:
            message = str(message)
            prefix = f"{path}: "
            if field != NON_FIELD and message.startswith(prefix):
                message = message[len(prefix):]
            errors.setdefault(field, []).append(message)
    return errors


def field_for(path):
    """The form field showing an error at the API path ``path``."""
    parts = path.split(".")
    while parts:
        field = API_PATH_TO_FIELD.get(".".join(parts))
        if field:
            return field
        parts.pop()
    return NON_FIELD


# --- helpers


def _schedule(post, zone):
    mode = post.get("schedule_mode", "cron")
    timezone = zone or None
    if mode == "every":
        n, unit = post.get("every_n", "").strip(), post.get("every_unit", "minutes")
        seconds = int(n) * UNITS.get(unit, 60) if n.isdigit() else n
        return {"type": "interval", "seconds": seconds, "timezone": timezone}
    if mode == "none":
        return {"type": "none", "timezone": timezone}
    if mode == "once":
        return {"type": "once", "at": local_instant(post.get("once_at", ""), zone) or "", "timezone": timezone}
    return {"type": "cron", "expression": post.get("cron_expression", "").strip(), "timezone": timezone}


def _request(post, stored_auth):
    request = {
        "url": post.get("url", "").strip(),
        "method": post.get("method") or "GET",
        "headers": dict(_header_rows(post)),
        "body": post.get("body", ""),
        "body_format": post.get("body_format") or "raw",
        "timeout_seconds": _int(post.get("timeout_seconds", ""), 30),
        "connect_timeout_seconds": _float(post.get("connect_timeout_seconds", ""), None),
        "follow_redirects": _checked(post, "follow_redirects"),
        "auth": _auth(post, stored_auth),
    }
    if request["method"] in ("GET", "HEAD") and not request["body"].strip():
        request["body"] = ""
    return request


def _script(post):
    """The script block. A textarea posts CRLF line ends; a shell would read each \\r as part
    of a command. Every environment row is sent: a row removed (or its name cleared) removes
    the variable, and a value left as the mask keeps the stored one (the API's rule). The
    network checkbox is sent either way: unchecked is ``allow_network: false``."""
    return {
        "language": post.get("script_language", ""),
        "source": post.get("script_source", "").replace("\r\n", "\n"),
        "env": dict(_env_rows(post)),
        "allow_network": _checked(post, "script_allow_network"),
    }


def _env_rows(post):
    """(name, value) of the environment rows; a row without a name counts only when a value
    was typed into it, so its error shows."""
    names, values = post.getlist("env_name"), post.getlist("env_value")
    return [(name.strip(), value) for name, value in zip(names, values + [""] * (len(names) - len(values)))
            if name.strip() or value not in ("", MASK)]


def _auth(post, stored_auth):
    kind = post.get("auth_type", "none")
    stored = stored_auth or {}
    if kind == "basic":
        password = post.get("auth_password", "")
        if not password and stored.get("type") == "basic":
            password = MASK
        return {"type": "basic", "username": post.get("auth_username", ""), "password": password}
    if kind == "bearer":
        token = post.get("auth_token", "")
        if not token and stored.get("type") == "bearer":
            token = MASK
        return {"type": "bearer", "token": token}
    return None


def _dependency_rows(post):
    """(upstream job id, on) for every dependency row with a job chosen."""
    jobs, ons = post.getlist("dependency_job"), post.getlist("dependency_on")
    return [(job.strip(), on or "success") for job, on in zip(jobs, ons + ["success"] * (len(jobs) - len(ons)))
            if job.strip()]


def _header_rows(post):
    """Header rows with a name; a row with only a value is kept so its error shows."""
    names, values = post.getlist("header_name"), post.getlist("header_value")
    rows = []
    for name, value in zip(names, values + [""] * (len(names) - len(values))):
        if name.strip() or value.strip():
            rows.append((name.strip(), value.strip()))
    return rows


def local_instant(text, zone):
    """A datetime-local value read in ``zone`` -> ISO 8601 in UTC; empty -> None.
    Anything unreadable is passed on for the API to refuse."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        naive = datetime.fromisoformat(text)
    except ValueError:
        return text
    if naive.tzinfo is not None:
        return naive.isoformat()
    try:
        tz = load_zone(zone or "UTC", "timezone")
    except Exception:  # the schedule's timezone error is reported on its own field
        tz = ZoneInfo("UTC")
    return naive.replace(tzinfo=tz).isoformat()


def _local(value, zone):
    """A stored instant as a datetime-local value in ``zone``; with its seconds when it has
    some, so saving the form unchanged does not move it."""
    if value is None:
        return ""
    try:
        local = value.astimezone(ZoneInfo(zone))
    except Exception:
        local = value
    return local.strftime(LOCAL_FORMAT + (":%S" if local.second else ""))


def _int(text, default):
    text = str(text).strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        return text


def _float(text, default):
    text = str(text).strip()
    if not text:
        return default
    try:
        return float(text)
    except ValueError:
        return text


def _number(value):
    return str(int(value)) if float(value).is_integer() else str(value)


def _checked(post, name):
    return post.get(name) in ("on", "true", "1")



# --- execution windows: one per line in the form, the API's objects in the body ----------
# "mon-fri 08:00-18:00", "sat,sun 22:00-06:00" (an end at or before the start closes the
# next day: overnight); blackouts "2027-12-24..2027-12-26" or one date.

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


def windows_text(windows):
    return "\n".join(f"{_days_text(w['days'])} {w['start']}-{w['end']}" for w in windows or [])


def _days_text(days):
    indexes = [_DAYS.index(day) for day in days]
    if len(indexes) > 2 and indexes == list(range(indexes[0], indexes[-1] + 1)):
        return f"{days[0]}-{days[-1]}"
    return ",".join(days)


def windows_from_text(text):
    """Each line as a window object; a line that does not parse goes on as given (its days
    and times), so the API refuses it with its own message and path."""
    windows = []
    for line in _lines(text):
        days_part, _, times = line.partition(" ")
        start, _, end = times.strip().partition("-")
        start, end = start.strip(), end.strip()
        window = {"days": _expand_days(days_part), "start": start, "end": end}
        if start and end and len(start) == len(end) == 5 and end <= start:
            window["overnight"] = True
        windows.append(window)
    return windows


def _expand_days(text):
    days = []
    for part in text.lower().split(","):
        first, dash, last = part.strip().partition("-")
        if dash and first in _DAYS and last in _DAYS:
            begin, end = _DAYS.index(first), _DAYS.index(last)
            days.extend(_DAYS[i % 7] for i in range(begin, end + 1 if end >= begin else end + 8))
        elif part.strip():
            days.append(part.strip())
    return days


def blackouts_text(blackouts):
    return "\n".join(b["start"] if b["start"] == b["end"] else f"{b['start']}..{b['end']}"
                     for b in blackouts or [])


def blackouts_from_text(text):
    found = []
    for line in _lines(text):
        start, _, end = line.partition("..")
        found.append({"start": start.strip(), "end": (end or start).strip()})
    return found


def _lines(text):
    return [line.strip() for line in (text or "").splitlines() if line.strip()]
