"""Alert texts and channel payloads: pure functions."""

from cronsvc.notify import formats

EVIDENCE = {
    "job": {"id": "j1", "name": "Nightly report", "schedule": "At 03:00, every day"},
    "project": {"id": "p1", "name": "Billing"},
    "execution": {"id": "e1", "scheduled_for": "2026-01-01T03:00:00+00:00", "finished_at": "2026-01-01T03:00:02+00:00",
                  "status": "failed", "attempts": 3, "error_kind": "http_status", "error_message": "HTTP 500",
                  "response_status": 500, "response_excerpt": "boom " * 200,
                  "url": "https://cron.example.com/executions/e1/"},
}


def test_a_failure_alert_carries_the_evidence():
    subject, text = formats.alert_message("failure", EVIDENCE)
    assert subject == "Job failing: Nightly report"
    for expected in ("Nightly report", "Billing", "At 03:00, every day", "2026-01-01T03:00:00+00:00", "failed",
                     "Attempts: 3", "HTTP status: 500", "http_status: HTTP 500",
                     "https://cron.example.com/executions/e1/"):
        assert expected in text
    response_line = next(line for line in text.splitlines() if line.startswith("Response: "))
    assert len(response_line) <= len("Response: ") + formats.EXCERPT_CHARS


def test_an_alert_without_a_run_has_no_run_lines():
    subject, text = formats.alert_message("recovery", {"job": {"name": "x"}, "project": {"name": "p"}})
    assert subject == "Job recovered: x" and "Status" not in text


def test_slack_and_discord_payloads_stay_within_limits():
    text = "y" * 10000
    slack = formats.slack_payload("subject", text)
    assert slack["text"] == "subject" and len(slack["blocks"][0]["text"]["text"]) <= formats.SLACK_TEXT_LIMIT
    discord = formats.discord_payload("s" * 3000, text)
    assert len(discord["content"]) <= 2000 and len(discord["embeds"][0]["description"]) <= 4096
    assert discord["allowed_mentions"] == {"parse": []}


def test_telegram_url_and_payload():
    assert formats.telegram_url("123:abc") == "https://api.telegram.org/bot123:abc/sendMessage"
    assert formats.telegram_url("1:x", "http://127.0.0.1:9/") == "http://127.0.0.1:9/bot1:x/sendMessage"
    assert formats.telegram_payload("-100", "hi") == {"chat_id": "-100", "text": "hi", "disable_web_page_preview": True}


def test_execution_event_shape():
    event = formats.execution_event(type="job.execution.failed", timestamp="t", job_id="j", project="p",
                                    execution_id="e", status="failed", duration_ms=12, error_kind="timeout",
                                    error_message="took too long")
    assert set(event) == {"type", "version", "timestamp", "job_id", "project", "execution_id", "status",
                          "duration_ms", "error"}
    assert event["error"] == {"kind": "timeout", "message": "took too long"}
    ok = formats.execution_event(type="job.execution.succeeded", timestamp="t", job_id="j", project="p",
                                 execution_id="e", status="succeeded", duration_ms=1)
    assert ok["error"] is None


def test_event_types_of_statuses():
    assert formats.event_type_for("succeeded") == "job.execution.succeeded"
    assert formats.event_type_for("timed_out") == "job.execution.failed"
    assert formats.event_type_for("dead") == "job.execution.dead"
    assert formats.event_type_for("skipped") is None and formats.event_type_for("queued") is None
