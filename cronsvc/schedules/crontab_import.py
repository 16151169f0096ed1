"""Import a pasted crontab: every curl/wget line becomes a job; every other line is explained.

A line is one of: blank, a comment, an environment assignment (CRON_TZ= and TZ= set
the timezone of the lines that follow; other variables are kept only so that
$NAME in commands can be expanded), or a job: 5 fields or an @macro, then the
command. Nothing is half-imported: a job line either yields an ImportedJob or a
CrontabLineError with its line number, a code and a reason for a person.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from .cron import compile_cron
from .errors import ScheduleError
from .http_command import CommandError, parse_http_command, starts_with_user_field
from .localtime import load_zone

MAX_CRONTAB_BYTES = 64 * 1024
MAX_CRONTAB_LINES = 1000
MAX_NAME_LENGTH = 100
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)\s*=\s*(.*)$")
_CRON_FIELD = re.compile(r"^[0-9A-Za-z*/,#?-]+$")
_TIMEZONE_VARIABLES = ("CRON_TZ", "TZ")


@dataclass(frozen=True)
class ImportedJob:
    line: int
    name: str
    schedule: dict
    request: dict


@dataclass(frozen=True)
class CrontabLineError:
    line: int
    text: str
    code: str
    reason: str


@dataclass(frozen=True)
class CrontabImport:
    jobs: list[ImportedJob] = field(default_factory=list)
    errors: list[CrontabLineError] = field(default_factory=list)


class _LineRefused(Exception):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


@dataclass
class _Environment:
    timezone: str
    timezone_error: str | None = None  # set when the last CRON_TZ/TZ line named an unknown zone
    user_field: bool = False  # a system crontab: each command starts with the user it runs as
    variables: dict[str, str] = field(default_factory=dict)


def parse_crontab(text: str, *, default_timezone: str = "UTC") -> CrontabImport:
    """Read a crontab; raises ScheduleError(crontab_too_large) above 64 KiB or 1000 lines."""
    _check_size(text)
    result = CrontabImport()
    env = _Environment(default_timezone, user_field=_is_system_crontab(text))
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            job = _read_line(number, line, env)
        except _LineRefused as refused:
            result.errors.append(CrontabLineError(number, raw, refused.code, refused.reason))
        else:
            if job is not None:
                result.jobs.append(job)
    return result


def _is_system_crontab(text: str) -> bool:
    """A system crontab (/etc/crontab, /etc/cron.d/*) has a user field on every job line, so
    one line that clearly has one (root, www-data, ... or a user before curl/wget) says so for
    all: "0 3 * * * root backup.sh" then runs 'backup.sh', not 'root'."""
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or _ASSIGNMENT.match(line):
            continue
        try:
            _, command = _split_schedule(line)
        except _LineRefused:
            continue
        if starts_with_user_field(command):
            return True
    return False


def _check_size(text: str) -> None:
    size = len(text.encode("utf-8"))
    lines = len(text.splitlines())
    if size > MAX_CRONTAB_BYTES or lines > MAX_CRONTAB_LINES:
        raise ScheduleError(
            "crontab_too_large",
            "crontab",
            f"crontab: {size} bytes in {lines} lines is too large; import at most "
            f"{MAX_CRONTAB_LINES} lines and {MAX_CRONTAB_BYTES // 1024} KiB at a time.",
        )


def _read_line(number: int, line: str, env: _Environment) -> ImportedJob | None:
    assignment = _ASSIGNMENT.match(line)
    if assignment:
        _assign(assignment.group(1), _unquote(assignment.group(2)), env)
        return None
    expression, command = _split_schedule(line)
    schedule = {"type": "cron", "expression": expression, "timezone": _timezone(env)}
    try:
        request = parse_http_command(command, env.variables, user_field=env.user_field)
    except CommandError as exc:
        raise _LineRefused(exc.code, exc.reason) from None
    return ImportedJob(number, _job_name(request["url"]), schedule, request)


def _assign(name: str, value: str, env: _Environment) -> None:
    if name not in _TIMEZONE_VARIABLES:
        env.variables[name] = value
        return
    try:
        load_zone(value, name)
    except ScheduleError:
        env.timezone_error = (
            f"the timezone '{value}' set by {name}= is unknown; fix that line and import again."
        )
        raise _LineRefused(
            "unknown_timezone", f"'{value}' is not a known IANA timezone (e.g. 'Europe/Berlin')."
        ) from None
    env.timezone, env.timezone_error = value, None


def _timezone(env: _Environment) -> str:
    if env.timezone_error:
        raise _LineRefused("unknown_timezone", env.timezone_error)
    return env.timezone


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def _split_schedule(line: str) -> tuple[str, str]:
    """(normalised cron expression, command) of a job line; raises _LineRefused."""
    if line.startswith("@"):
        macro, *rest = line.split(None, 1)
        fields, command = [macro], (rest[0] if rest else "")
    else:
        parts = line.split(None, 5)
        if len(parts) < 6:
            raise _LineRefused("invalid_cron", "a job line needs 5 schedule fields and a command.")
        fields, command = parts[:5], parts[5]
        if _looks_like_six_fields(command):
            raise _LineRefused(
                "invalid_cron", "the line seems to have 6 schedule fields; a seconds field is not supported."
            )
    expression = " ".join(fields)
    try:
        compile_cron(expression)
    except ScheduleError as exc:
        raise _LineRefused("invalid_cron", exc.message.removeprefix("schedule.expression: ")) from None
    if not command:
        raise _LineRefused("invalid_cron", "the line has a schedule but no command.")
    return expression, _cron_command(command)


def _looks_like_six_fields(command: str) -> bool:
    """A command never starts with what looks like a cron field: then it is a 6th field."""
    first = command.split(None, 1)[0]
    return bool(_CRON_FIELD.match(first)) and (first[0].isdigit() or first.startswith("*"))


def _cron_command(command: str) -> str:
    """cron turns an unescaped % into a newline and feeds what follows as stdin; keep the command only."""
    command = re.split(r"(?<!\\)%", command, maxsplit=1)[0]
    return command.replace("\\%", "%").strip()


def _job_name(url: str) -> str:
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    return (parts.hostname or "") + path[: MAX_NAME_LENGTH - len(parts.hostname or "")]
