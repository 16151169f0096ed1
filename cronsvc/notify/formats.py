"""What an alert says, and the JSON each channel kind expects.

An alert's ``evidence`` is a plain dict (see ``alert_message``): the job, its schedule in
words, the run's times, status, error, response excerpt, attempt count and a link to the
run's page. Every builder here is a pure function of its arguments.
"""

from __future__ import annotations

SUBJECTS = {
    "failure": "Job failing: {job}",
    "recovery": "Job recovered: {job}",
    "disabled": "Job disabled: {job}",
    "late": "Run started late: {job}",
    "long_running": "Run still going: {job}",
    "reminder": "Still failing: {job}",
    "test": "Test message from cronsvc",
}
EXCERPT_CHARS = 500
SLACK_TEXT_LIMIT = 3000
DISCORD_CONTENT_LIMIT = 2000
DISCORD_DESCRIPTION_LIMIT = 4096
TELEGRAM_TEXT_LIMIT = 4096


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def alert_message(event: str, evidence: dict) -> tuple[str, str]:
    """(subject, text) of an alert about a job's run."""
    job = evidence.get("job", {})
    run = evidence.get("execution") or {}
    subject = SUBJECTS.get(event, "{job}: " + event).format(job=job.get("name", "?"))
    lines = [subject, ""]
    if evidence.get("detail"):
        lines += [evidence["detail"], ""]
    lines.append(f"Job: {job.get('name', '?')} (project {evidence.get('project', {}).get('name', '?')})")
    if job.get("schedule"):
        lines.append(f"Schedule: {job['schedule']}")
    if run:
        lines += _run_lines(run)
    return subject, "\n".join(lines).rstrip()


def _run_lines(run: dict) -> list[str]:
    lines = []
    for label, key in (("Scheduled for", "scheduled_for"), ("Started", "started_at"),
                       ("Finished", "finished_at"), ("Status", "status")):
        if run.get(key):
            lines.append(f"{label}: {run[key]}")
    if run.get("attempts"):
        lines.append(f"Attempts: {run['attempts']}")
    if run.get("response_status") is not None:
        lines.append(f"HTTP status: {run['response_status']}")
    if run.get("error_kind") or run.get("error_message"):
        lines.append(f"Error: {run.get('error_kind') or 'error'}: {run.get('error_message') or ''}".rstrip(": "))
    if run.get("response_excerpt"):
        lines.append(f"Response: {excerpt(run['response_excerpt'])}")
    if run.get("url"):
        lines.append(f"Details: {run['url']}")
    return lines


def slack_payload(subject: str, text: str) -> dict:
    """Slack (and Mattermost/Rocket.Chat) incoming webhooks: ``text`` is the fallback and
    the notification, the section block shows the whole message."""
    body = excerpt(text, SLACK_TEXT_LIMIT)
    return {
        "text": subject,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": body}}],
    }


def discord_payload(subject: str, text: str) -> dict:
    return {
        "content": excerpt(subject, DISCORD_CONTENT_LIMIT),
        "embeds": [{"title": excerpt(subject, 256), "description": excerpt(text, DISCORD_DESCRIPTION_LIMIT)}],
        "allowed_mentions": {"parse": []},  # a job name must not ping @everyone
    }


def telegram_url(bot_token: str, api_base: str = "https://api.telegram.org") -> str:
    return f"{api_base.rstrip('/')}/bot{bot_token}/sendMessage"


def telegram_payload(chat_id: str, text: str) -> dict:
    return {"chat_id": chat_id, "text": excerpt(text, TELEGRAM_TEXT_LIMIT), "disable_web_page_preview": True}


def webhook_payload(event: str, subject: str, text: str, data: dict, timestamp: str) -> dict:
    """The generic webhook channel's JSON (signed like runs, with Standard Webhooks)."""
    return {"type": f"notification.{event}", "version": 1, "timestamp": timestamp,
            "subject": subject, "text": text, "data": data}


def execution_event(*, type: str, timestamp: str, job_id: str, project: str, execution_id: str | None,
                    status: str | None, duration_ms: int | None, error_kind: str = "",
                    error_message: str = "") -> dict:
    """An outgoing execution event, in the documented shape."""
    return {
        "type": type,
        "version": 1,
        "timestamp": timestamp,
        "job_id": job_id,
        "project": project,
        "execution_id": execution_id,
        "status": status,
        "duration_ms": duration_ms,
        "error": {"kind": error_kind, "message": excerpt(error_message, 1000)} if (error_kind or error_message)
        else None,
    }


EVENT_TYPES = {
    "succeeded": "job.execution.succeeded",
    "failed": "job.execution.failed",
    "timed_out": "job.execution.failed",
    "dead": "job.execution.dead",
}


def event_type_for(status: str) -> str | None:
    """The event a final run status emits (none for skipped runs and retries)."""
    return EVENT_TYPES.get(status)
