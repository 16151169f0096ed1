"""The `cronsvc` command: the REST API from a shell (see docs/cli.md for every command)."""

import json
import sys

import click

from . import __version__
from .client import MAX_PAGE_SIZE, Client
from .config import DEFAULT_PROFILE, config_path, profiles, selected_profile, write_config
from .errors import EXIT_API_ERROR, EXIT_OK, EXIT_USAGE, ApiError, CronsvcError
from .output import emit_line, emit_list, emit_one, output_option, stream_header, table, to_json


def _schedule_text(raw):
    schedule = raw.get("schedule") or {}
    kind = schedule.get("type")
    if kind == "cron":
        return f"{schedule.get('expression')} ({schedule.get('timezone', 'UTC')})"
    if kind == "interval":
        return f"every {schedule.get('seconds')}s"
    if kind == "once":
        return f"once at {schedule.get('at')}"
    return kind or "-"


def _http_status(raw):
    return (raw.get("response") or {}).get("status")


PROJECT_COLUMNS = [("ID", lambda r: r["id"]), ("NAME", lambda r: r.get("name")), ("SLUG", lambda r: r.get("slug")),
                   ("TIMEZONE", lambda r: r.get("timezone")), ("JOBS", lambda r: r.get("job_count"))]
JOB_COLUMNS = [("ID", lambda r: r["id"]), ("NAME", lambda r: r.get("name")), ("SCHEDULE", _schedule_text),
               ("ENABLED", lambda r: r.get("enabled")), ("NEXT RUN", lambda r: r.get("next_run_at")),
               ("LAST STATUS", lambda r: r.get("last_status"))]
EXECUTION_COLUMNS = [("ID", lambda r: r["id"]), ("JOB", lambda r: r.get("job")),
                     ("SCHEDULED FOR", lambda r: r.get("scheduled_for")), ("TRIGGER", lambda r: r.get("trigger")),
                     ("STATUS", lambda r: r.get("status")), ("ATTEMPT", lambda r: r.get("attempt")),
                     ("HTTP", _http_status), ("MS", lambda r: r.get("duration_ms"))]
EXECUTION_WIDTHS = [36, 36, 27, 10, 9, 7, 4, 6]  # tail prints rows before it knows them all
MONITOR_COLUMNS = [("ID", lambda r: r["id"]), ("NAME", lambda r: r.get("name")), ("SCHEDULE", _schedule_text),
                   ("STATE", lambda r: r.get("state")), ("LAST PING", lambda r: r.get("last_ping_at")),
                   ("NEXT EXPECTED", lambda r: r.get("next_expected_at"))]
PING_COLUMNS = [("ID", lambda r: r["id"]), ("KIND", lambda r: r.get("kind")),
                ("EXIT CODE", lambda r: r.get("exit_code")), ("MS", lambda r: r.get("duration_ms")),
                ("AT", lambda r: r.get("created_at"))]
VERSION_COLUMNS = [("VERSION", lambda r: r["number"]), ("CREATED", lambda r: r.get("created_at")),
                   ("SOURCE", lambda r: r.get("source")), ("BY", lambda r: (r.get("author") or {}).get("name")),
                   ("ROLLBACK OF", lambda r: r.get("rollback_of")),
                   ("CHANGED", lambda r: ", ".join(r.get("changes") or {}) or None)]
RUN_COLUMNS = [("AT (UTC)", lambda r: r["at"]), ("LOCAL", lambda r: r["local"])]


def client_of(ctx):
    """The client, built on first use so `--help` and usage errors need no configuration."""
    obj = ctx.ensure_object(dict)
    if "client" not in obj:
        obj["client"] = Client.from_environment(obj.get("url"), obj.get("api_key"), profile=obj.get("profile"),
                                                timeout=obj.get("timeout", 30.0))
    return obj["client"]


def with_client(function):
    """Pass the client as the command's first argument."""

    @click.pass_context
    def wrapper(ctx, *args, **kwargs):
        return function(client_of(ctx), *args, **kwargs)

    wrapper.__name__ = function.__name__
    wrapper.__doc__ = function.__doc__
    return wrapper


def list_options(default_limit):
    """--limit and --page-size for a list command (pages are fetched as needed)."""

    def decorate(command):
        command = click.option("--page-size", type=click.IntRange(1, MAX_PAGE_SIZE), default=None,
                               help=f"Items per request (1-{MAX_PAGE_SIZE}; default: the limit's worth, "
                                    "else the API's 50).")(command)
        return click.option("--limit", type=click.IntRange(min=0), default=default_limit, show_default=True,
                            help="At most this many (0: all).")(command)

    return decorate


def api_value_option(name, text, known):
    """A filter whose values the API checks (400 `invalid_choice`, exit 1), so a server that
    knows a newer value is not refused by an older client."""
    return click.option(name, metavar="VALUE", help=f"{text}: {known}.")


def read_json_file(path):
    """A JSON object from a file ('-': standard input), or a usage error."""
    if path is None:
        return {}
    try:
        with click.open_file(path, "r") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise click.BadParameter(f"{path}: {exc}", param_hint="--file") from None
    if not isinstance(data, dict):
        raise click.BadParameter(f"{path}: a JSON object is needed", param_hint="--file")
    return data


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cronsvc")
@click.option("--url", metavar="URL", help="The server (wins over CRONSVC_URL and the config file).")
@click.option("--api-key", metavar="KEY", help="The API key (wins over CRONSVC_API_KEY and the config file).")
@click.option("--profile", metavar="NAME",
              help="The config file's profile to use [env: CRONSVC_PROFILE; default: the default one].")
@click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait for each request.")
@click.pass_context
def cli(ctx, url, api_key, profile, timeout):
    """cronsvc: your cron jobs, their runs and monitors from a shell.

    Each setting comes from --url/--api-key, else CRONSVC_URL/CRONSVC_API_KEY, else the
    profile (--profile, CRONSVC_PROFILE, else the default one) of the config file
    `cronsvc login` writes.
    Exit codes: 0 ok, 1 API error (4xx), 2 usage, 3 auth (401/403), 4 not found, 5 server or network.
    """
    ctx.ensure_object(dict).update(url=url, api_key=api_key, profile=profile, timeout=timeout)


@cli.command()
@click.option("--url", metavar="URL", help="The server, e.g. https://cron.example.com (or the global --url).")
@click.option("--api-key", metavar="KEY", help="An API key (csk_live_...); asked for when left out.")
@click.option("--profile", metavar="NAME", help="Save it as this profile (default: the global --profile, "
                                                "else CRONSVC_PROFILE, else the default profile).")
@click.option("--verify/--no-verify", default=True, show_default=True, help="Check the key with one request first.")
@click.pass_obj
def login(obj, url, api_key, profile, verify):
    """Save the server URL and API key in the config file (mode 600), as a profile."""
    url = url or obj.get("url")
    if not url:
        raise click.UsageError("Missing option '--url'.")
    api_key = api_key or obj.get("api_key") or click.prompt("Api key", hide_input=True)
    profile = selected_profile(profile or obj.get("profile"))
    client = Client(url, api_key, timeout=obj.get("timeout", 30.0))
    if verify:
        list(client.list_projects(limit=1))
    path = write_config(client.url, api_key, profile=profile)
    named = "" if profile == DEFAULT_PROFILE else f" as profile {profile}"
    click.echo(f"Logged in to {client.url}{named}; saved to {path}")


@cli.command("config-path")
def config_path_command():
    """Print where the config file is (or would be)."""
    click.echo(str(config_path()))


PROFILE_COLUMNS = [("", lambda r: "*" if r["active"] else ""), ("PROFILE", lambda r: r["name"]),
                   ("URL", lambda r: r["url"]), ("KEY", lambda r: "set" if r["has_api_key"] else "none")]


@cli.command("profiles")
@output_option
@click.pass_obj
def profiles_command(obj, output):
    """List the config file's profiles (never their keys); * marks the one in use."""
    active = selected_profile(obj.get("profile"))
    rows = [{"name": item.name, "url": item.url, "has_api_key": bool(item.api_key), "active": item.name == active}
            for item in profiles().values() if item.name != DEFAULT_PROFILE or item.url or item.api_key]
    click.echo(to_json(rows) if output == "json" else table(rows, PROFILE_COLUMNS))


# -- projects -------------------------------------------------------------------------

@cli.group()
def projects():
    """Projects of your organization (the ones your key reaches)."""


@projects.command("list")
@list_options(0)
@output_option
@with_client
def projects_list(client, limit, page_size, output):
    """List projects."""
    emit_list(list(client.list_projects(limit=limit or None, page_size=page_size)), output, PROJECT_COLUMNS)


@projects.command("show")
@click.argument("project_id")
@output_option
@with_client
def projects_show(client, project_id, output):
    """Show one project."""
    emit_one(client.get_project(project_id), output)


# -- jobs -----------------------------------------------------------------------------

@cli.group()
def jobs():
    """Create, change, run and delete jobs."""


@jobs.command("list")
@click.option("--project", help="Only this project's jobs (id).")
@click.option("--enabled/--disabled", default=None, help="Only enabled (or only paused/disabled) jobs.")
@click.option("--tag", help="Only jobs with this tag.")
@click.option("--search", help="Part of a name or a tag.")
@api_value_option("--health", "Only jobs in this health", "new, healthy, failing, paused, disabled, expired")
@list_options(0)
@output_option
@with_client
def jobs_list(client, project, enabled, tag, search, health, limit, page_size, output):
    """List jobs (every page unless --limit)."""
    found = client.list_jobs(limit=limit or None, page_size=page_size, project=project, enabled=enabled, tag=tag,
                             search=search, health=health)
    emit_list(list(found), output, JOB_COLUMNS)


@jobs.command("show")
@click.argument("job_id")
@output_option
@with_client
def jobs_show(client, job_id, output):
    """Show one job."""
    emit_one(client.get_job(job_id), output)


def schedule_options(command):
    options = [
        click.option("--cron", help="A cron expression, e.g. '0 3 * * 1-5' or @daily."),
        click.option("--every", type=click.IntRange(min=1), help="An interval in seconds."),
        click.option("--at", "once_at", help="Run once at this instant (ISO 8601 with an offset or Z)."),
        click.option("--timezone", help="IANA timezone of the schedule (default: the project's)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def job_options(command):
    options = [
        click.option("--file", "body_file", type=click.Path(allow_dash=True),
                     help="A JSON job body as the API takes it ('-': stdin); the options below override it."),
        click.option("--project", help="Project id (may be left out when your key reaches one project)."),
        click.option("--name"),
        click.option("--description"),
        click.option("--url", help="The URL to call."),
        click.option("--method", type=click.Choice(["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"],
                                                   case_sensitive=False)),
        click.option("--header", "headers", multiple=True, metavar="'NAME: VALUE'", help="Repeatable."),
        click.option("--body", "request_body", help="The request body."),
        click.option("--body-format", type=click.Choice(["raw", "json", "form"])),
        click.option("--request-timeout", type=click.IntRange(min=1), help="Seconds the call may take."),
        click.option("--tag", "tags", multiple=True, help="Repeatable; replaces the job's tags."),
        click.option("--max-attempts", type=click.IntRange(min=1), help="Attempts per run, retries included."),
        click.option("--enabled/--disabled", default=None, help="Create or set the job enabled or paused."),
    ]
    command = schedule_options(command)
    for option in reversed(options):
        command = option(command)
    return command


def parse_headers(headers):
    parsed = {}
    for header in headers:
        name, sep, value = header.partition(":")
        if not sep or not name.strip():
            raise click.BadParameter(f"{header!r} is not 'Name: value'", param_hint="--header")
        parsed[name.strip()] = value.strip()
    return parsed


def schedule_of(cron, every, once_at, timezone, current=None):
    """The schedule the options describe; a timezone alone changes the current schedule's."""
    given = [name for name, value in (("--cron", cron), ("--every", every), ("--at", once_at)) if value]
    if len(given) > 1:
        raise click.UsageError(f"Give one of {', '.join(given)}.")
    if cron:
        schedule = {"type": "cron", "expression": cron}
    elif every:
        schedule = {"type": "interval", "seconds": every}
    elif once_at:
        schedule = {"type": "once", "at": once_at}
    elif timezone:
        if current is None:
            raise click.UsageError("--timezone needs --cron, --every or --at.")
        schedule = dict(current)
    else:
        return None
    if timezone:
        schedule["timezone"] = timezone
    return schedule


def job_body(options, current_schedule=None, *, timezone_needs_job=None):
    """The JSON body from --file and the options (options win)."""
    body = read_json_file(options["body_file"])
    for key in ("project", "name", "description", "enabled"):
        if options[key] is not None:
            body[key] = options[key]
    if options["tags"]:
        body["tags"] = list(options["tags"])
    request = dict(body.get("request") or {})
    for key, value in (("url", options["url"]), ("body", options["request_body"]),
                       ("body_format", options["body_format"]), ("timeout_seconds", options["request_timeout"])):
        if value is not None:
            request[key] = value
    if options["method"]:
        request["method"] = options["method"].upper()
    if options["headers"]:
        request["headers"] = {**request.get("headers", {}), **parse_headers(options["headers"])}
    if request:
        body["request"] = request
    if options["max_attempts"] is not None:
        body["retry"] = {**body.get("retry", {}), "max_attempts": options["max_attempts"]}
    if options["timezone"] and not any(options[k] for k in ("cron", "every", "once_at")) and timezone_needs_job:
        current_schedule = timezone_needs_job().schedule
    schedule = schedule_of(options["cron"], options["every"], options["once_at"], options["timezone"],
                           current_schedule)
    if schedule:
        body["schedule"] = schedule
    return body


@jobs.command("create")
@job_options
@click.option("--idempotency-key", help="Run the command again with the same key (and options) within 24 h: "
                                        "the job created the first time is printed, no second one is made.")
@output_option
@with_client
def jobs_create(client, output, idempotency_key, **options):
    """Create a job, e.g. `cronsvc jobs create --name Nightly --cron '0 3 * * *' --url https://...`."""
    body = job_body(options)
    missing = [f"--{key}" for key in ("name", "url") if not (body.get(key) or (body.get("request") or {}).get(key))]
    if "schedule" not in body:
        missing.append("--cron, --every or --at")
    if missing:
        raise click.UsageError(f"Missing {', '.join(missing)} (or give them in --file).")
    emit_one(client.create_job(body, idempotency_key=idempotency_key), output)


@jobs.command("update")
@click.argument("job_id")
@job_options
@output_option
@with_client
def jobs_update(client, job_id, output, **options):
    """Change some fields of a job (the others keep their values)."""
    body = job_body(options, timezone_needs_job=lambda: client.get_job(job_id))
    if not body:
        raise click.UsageError("Nothing to change: give an option or --file.")
    emit_one(client.update_job(job_id, body), output)


@jobs.command("pause")
@click.argument("job_id")
@output_option
@with_client
def jobs_pause(client, job_id, output):
    """Pause a job (its dependents stop running after it too)."""
    emit_one(client.pause_job(job_id), output)


@jobs.command("resume")
@click.argument("job_id")
@output_option
@with_client
def jobs_resume(client, job_id, output):
    """Resume a job from now (runs missed while paused are not caught up)."""
    emit_one(client.resume_job(job_id), output)


@jobs.command("trigger")
@click.argument("job_id")
@output_option
@with_client
def jobs_trigger(client, job_id, output):
    """Run a job now, outside its schedule; prints the queued execution."""
    emit_one(client.trigger_job(job_id), output)


@jobs.command("delete")
@click.argument("job_id")
@click.option("--force", is_flag=True, help="Delete even if other jobs depend on this one.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask (needed when standard input is not a terminal).")
@with_client
def jobs_delete(client, job_id, force, yes):
    """Delete a job; its history is deleted after it."""
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("Deleting needs --yes when standard input is not a terminal.")
        click.confirm(f"Delete job {job_id} and its history?", abort=True)
    client.delete_job(job_id, force=force)
    click.echo(f"Deleted job {job_id}")


class GroupWithDefault(click.Group):
    """A group whose first argument, when it names none of its commands, goes to the
    ``default`` one: `jobs versions JOB` lists, `jobs versions show JOB N` shows."""

    def __init__(self, *args, default, **kwargs):
        super().__init__(*args, **kwargs)
        self.default = default

    def parse_args(self, ctx, args):
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [self.default, *args]
        return super().parse_args(ctx, args)


@jobs.group("versions", cls=GroupWithDefault, default="list")
def jobs_versions():
    """A job's versions: `jobs versions JOB` lists them, `jobs versions show JOB N` shows one."""


@jobs_versions.command("list")
@click.argument("job_id")
@list_options(0)
@output_option
@with_client
def jobs_versions_list(client, job_id, limit, page_size, output):
    """List a job's versions, newest first, with who made each and the fields it changed."""
    found = client.list_job_versions(job_id, limit=limit or None, page_size=page_size)
    emit_list(list(found), output, VERSION_COLUMNS)


@jobs_versions.command("show")
@click.argument("job_id")
@click.argument("number", type=click.IntRange(min=1))
@output_option
@with_client
def jobs_versions_show(client, job_id, number, output):
    """Show one version: its changes and the job's definition then (secrets masked)."""
    emit_one(client.get_job_version(job_id, number), output)


@jobs.command("rollback")
@click.argument("job_id")
@click.argument("number", type=click.IntRange(min=1))
@output_option
@with_client
def jobs_rollback(client, job_id, number, output):
    """Make version NUMBER's definition the job's again (a new version; prints it)."""
    emit_one(client.rollback_job(job_id, number), output)


@jobs.group("import")
def jobs_import():
    """Create jobs from another format."""


@jobs_import.command("crontab")
@click.argument("crontab_file", type=click.File("r"))
@click.option("--project", help="Project id (may be left out when your key reaches one project).")
@click.option("--dry-run", is_flag=True, help="Only show what would be created.")
@output_option
@with_client
def jobs_import_crontab(client, crontab_file, project, dry_run, output):
    """Create a job for every HTTP line of a crontab (FILE, '-': stdin).

    Lines that cannot become a job are listed with their code; the exit code is then 1.
    """
    result = client.import_crontab(crontab_file.read(), project=project, dry_run=dry_run)
    if output == "json":
        click.echo(to_json(result.raw))
    else:
        verb = "would create" if result.dry_run else "created"
        rows = [{"line": job["line"], "result": job["id"] or verb, "name": job["name"],
                 "detail": job.get("description_human")} for job in result.jobs]
        rows += [{"line": error["line"], "result": error["code"], "name": error["text"], "detail": error["reason"]}
                 for error in result.errors]
        rows.sort(key=lambda row: row["line"])
        columns = [("LINE", lambda r: r["line"]), ("RESULT", lambda r: r["result"]),
                   ("JOB / TEXT", lambda r: r["name"]), ("SCHEDULE / REASON", lambda r: r["detail"])]
        click.echo(table(rows, columns))
        click.echo(f"{len(result.jobs)} job(s) {verb}, {len(result.errors)} line(s) refused"
                   + (" (dry run)" if result.dry_run else ""))
    if result.errors:
        sys.exit(EXIT_API_ERROR)


@cli.command("next-runs")
@click.argument("job_id")
@click.option("--count", type=click.IntRange(min=1), help="How many (the API's default when left out).")
@click.option("--after", help="From this instant (ISO 8601) instead of now.")
@output_option
@with_client
def next_runs(client, job_id, count, after, output):
    """A job's next run times, in UTC and in its timezone."""
    result = client.next_runs(job_id, count=count, after=after)
    if output == "json":
        click.echo(to_json(result.raw))
        return
    click.echo(result.description)
    if result.runs:
        click.echo(table(result.runs, RUN_COLUMNS))


# -- executions -----------------------------------------------------------------------

@cli.group()
def executions():
    """The history of runs."""


def execution_filters(command):
    command = click.option("--project", help="Only runs of this project's jobs.")(command)
    return click.option("--job", help="Only runs of this job.")(command)


@executions.command("list")
@execution_filters
@api_value_option("--status", "Only runs in this status",
                  "queued, running, succeeded, failed, timed_out, skipped, cancelled, dead")
@api_value_option("--trigger", "Only runs started this way", "schedule, manual, retry, replay, dependency")
@click.option("--search", help="Words of the error or the response body, e.g. '\"read timed out\"' "
                               "(docs/search.md).")
@click.option("--status-code", metavar="CODE", help="The response's HTTP status: 503, or a class: 5xx.")
@click.option("--since", help="Scheduled at or after this instant (ISO 8601).")
@click.option("--until", help="Scheduled at or before this instant (ISO 8601).")
@list_options(50)
@output_option
@with_client
def executions_list(client, job, project, status, trigger, search, status_code, since, until, limit, page_size,
                    output):
    """List runs, newest first."""
    found = client.list_executions(limit=limit or None, page_size=page_size, job=job, project=project,
                                   status=status, trigger=trigger, q=search, status_code=status_code,
                                   scheduled_for_after=since, scheduled_for_before=until)
    emit_list(list(found), output, EXECUTION_COLUMNS)


@executions.command("show")
@click.argument("execution_id")
@output_option
@with_client
def executions_show(client, execution_id, output):
    """Show one run with its attempts."""
    emit_one(client.get_execution(execution_id), output)


@executions.command("cancel")
@click.argument("execution_id")
@output_option
@with_client
def executions_cancel(client, execution_id, output):
    """Cancel a queued or running run: a queued one never starts, a running one's request is
    closed; it is not retried. Cancelling a cancelled run prints it again; a finished one is
    refused (execution_finished, exit 1)."""
    emit_one(client.cancel_execution(execution_id), output)


@executions.command("tail")
@execution_filters
@click.option("--lines", "-n", type=click.IntRange(min=0), default=10, show_default=True,
              help="Recent runs to show first.")
@click.option("--interval", type=click.FloatRange(min=0.2), default=2.0, show_default=True,
              help="Seconds between polls.")
@output_option
@with_client
def executions_tail(client, job, project, lines, interval, output):
    """Follow runs as they are created and change status (Ctrl-C stops).

    Each new run and each status change prints a line; --output json prints JSON Lines.
    """
    stream_header(output, EXECUTION_COLUMNS, EXECUTION_WIDTHS)
    try:
        for run in client.follow_executions(job=job, project=project, backlog=lines, interval=interval):
            emit_line(run, output, EXECUTION_COLUMNS, EXECUTION_WIDTHS)
    except KeyboardInterrupt:
        pass  # the way to stop: not an error


# -- monitors -------------------------------------------------------------------------

@cli.group()
def monitors():
    """Heartbeat monitors: your own cron pings them, silence alerts you."""


@monitors.command("list")
@click.option("--project", help="Only this project's monitors.")
@api_value_option("--state", "Only monitors in this state", "new, up, late, down, paused")
@list_options(0)
@output_option
@with_client
def monitors_list(client, project, state, limit, page_size, output):
    """List monitors."""
    found = client.list_monitors(limit=limit or None, page_size=page_size, project=project, state=state)
    emit_list(list(found), output, MONITOR_COLUMNS)


@monitors.command("show")
@click.argument("monitor_id")
@output_option
@with_client
def monitors_show(client, monitor_id, output):
    """Show one monitor (with its ping URL)."""
    emit_one(client.get_monitor(monitor_id), output)


def monitor_options(command):
    options = [
        click.option("--file", "body_file", type=click.Path(allow_dash=True),
                     help="A JSON monitor body as the API takes it ('-': stdin); options override it."),
        click.option("--project", help="Project id (may be left out when your key reaches one project)."),
        click.option("--name"),
        click.option("--grace", type=click.IntRange(min=1), help="Seconds after the expected ping before it is down."),
    ]
    command = schedule_options(command)
    for option in reversed(options):
        command = option(command)
    return command


def monitor_body(options, current=None):
    body = read_json_file(options["body_file"])
    for key, value in (("project", options["project"]), ("name", options["name"]),
                       ("grace_seconds", options["grace"])):
        if value is not None:
            body[key] = value
    if options["once_at"]:
        raise click.UsageError("A monitor's schedule is --cron or --every.")
    timezone_only = options["timezone"] and not (options["cron"] or options["every"])
    schedule = schedule_of(options["cron"], options["every"], None, options["timezone"],
                           current() if current and timezone_only else None)
    if schedule:
        body["schedule"] = schedule
    return body


@monitors.command("create")
@monitor_options
@output_option
@with_client
def monitors_create(client, output, **options):
    """Create a monitor, e.g. `cronsvc monitors create --name Backup --cron '0 2 * * *' --grace 1800`."""
    body = monitor_body(options)
    if not body.get("name") or "schedule" not in body:
        raise click.UsageError("Missing --name and --cron or --every (or give them in --file).")
    emit_one(client.create_monitor(body), output)


@monitors.command("update")
@click.argument("monitor_id")
@monitor_options
@output_option
@with_client
def monitors_update(client, monitor_id, output, **options):
    """Change some fields of a monitor."""
    body = monitor_body(options, current=lambda: client.get_monitor(monitor_id).schedule)
    if not body:
        raise click.UsageError("Nothing to change: give an option or --file.")
    emit_one(client.update_monitor(monitor_id, body), output)


@monitors.command("pause")
@click.argument("monitor_id")
@output_option
@with_client
def monitors_pause(client, monitor_id, output):
    """Pause a monitor (never late or down; its next ping resumes it)."""
    emit_one(client.pause_monitor(monitor_id), output)


@monitors.command("resume")
@click.argument("monitor_id")
@output_option
@with_client
def monitors_resume(client, monitor_id, output):
    """Resume a monitor (back to new, waiting for its next ping)."""
    emit_one(client.resume_monitor(monitor_id), output)


@monitors.command("delete")
@click.argument("monitor_id")
@click.option("--yes", "-y", is_flag=True, help="Do not ask (needed when standard input is not a terminal).")
@with_client
def monitors_delete(client, monitor_id, yes):
    """Delete a monitor and its pings."""
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("Deleting needs --yes when standard input is not a terminal.")
        click.confirm(f"Delete monitor {monitor_id}?", abort=True)
    client.delete_monitor(monitor_id)
    click.echo(f"Deleted monitor {monitor_id}")


@monitors.command("pings")
@click.argument("monitor_id")
@list_options(50)
@output_option
@with_client
def monitors_pings(client, monitor_id, limit, page_size, output):
    """A monitor's pings, newest first."""
    emit_list(list(client.list_pings(monitor_id, limit=limit or None, page_size=page_size)), output, PING_COLUMNS)


# -- entry point ----------------------------------------------------------------------

def report(error):
    """The API's code and message on stderr, then each field's messages and any extra keys."""
    if isinstance(error, ApiError):
        click.echo(f"Error: {error.code} (HTTP {error.status}): {error.message}", err=True)
        for path, messages in error.fields.items():
            for message in messages if isinstance(messages, list) else [messages]:
                click.echo(f"  {path}: {message}", err=True)
        for key, value in error.extra.items():
            click.echo(f"  {key}: {json.dumps(value, ensure_ascii=False)}", err=True)
    else:
        click.echo(f"Error: {error}", err=True)


def main(argv=None):
    try:
        code = cli.main(args=argv, prog_name="cronsvc", standalone_mode=False)
    except click.ClickException as exc:  # usage errors: 2
        exc.show()
        code = exc.exit_code
    except click.exceptions.Abort:  # a declined confirmation or Ctrl-C at a prompt
        click.echo("Aborted.", err=True)
        code = EXIT_USAGE
    except CronsvcError as exc:
        report(exc)
        code = exc.exit_code
    sys.exit(code if isinstance(code, int) else EXIT_OK)
