"""`cronsvc monitors ...` against the real web process, pinged through its real ping URL."""

import re

import pytest
import requests
from django.db import transaction

from apps.monitors import services
from apps.monitors.models import Monitor

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def create(cli, name="Nightly backup"):
    return cli.ok("monitors", "create", "--name", name, "--cron", "0 2 * * *", "--timezone", "Europe/Berlin",
                  "--grace", "1800", "-o", "json")


def test_create_list_show_update_and_delete(cli, client_tenant):
    created = create(cli)
    monitor = Monitor.objects.get(pk=created["id"])
    assert (monitor.project_id, monitor.cron_expression, monitor.timezone, monitor.grace_seconds, monitor.state) == (
        client_tenant.project.pk, "0 2 * * *", "Europe/Berlin", 1800, "new")

    table = cli.ok("monitors", "list").out.splitlines()
    assert re.split(r"\s{2,}", table[0]) == ["ID", "NAME", "SCHEDULE", "STATE", "LAST PING", "NEXT EXPECTED"]
    assert table[1].startswith(created["id"]) and "0 2 * * * (Europe/Berlin)" in table[1]
    shown = cli.ok("monitors", "show", created["id"]).out
    assert re.search(rf"^ping_url\s+{re.escape(created['ping_url'])}$", shown, re.M)

    cli.ok("monitors", "update", created["id"], "--every", "600", "--name", "Every ten minutes")
    monitor.refresh_from_db()
    assert (monitor.schedule_type, monitor.interval_seconds, monitor.name) == ("interval", 600, "Every ten minutes")
    cli.ok("monitors", "update", created["id"], "--timezone", "Asia/Tokyo")  # keeps the interval
    monitor.refresh_from_db()
    assert (monitor.interval_seconds, monitor.timezone) == (600, "Asia/Tokyo")

    assert cli("monitors", "delete", created["id"]).code == 2  # no --yes, no terminal
    cli.ok("monitors", "delete", created["id"], "--yes")
    assert not Monitor.objects.filter(pk=created["id"]).exists()
    assert cli("monitors", "show", created["id"]).code == 4


def test_pause_resume_and_pings_through_cursor_pages(cli, web):
    created = create(cli)

    assert cli.ok("monitors", "pause", created["id"], "-o", "json")["state"] == "paused"
    assert cli.ok("monitors", "resume", created["id"], "-o", "json")["state"] == "new"

    for path in ("/start", "", "/fail"):
        assert requests.post(created["ping_url"] + path, data=b"log line", timeout=10).status_code == 200
    pings = []
    served = web.requests_during(
        lambda: pings.extend(cli.ok("monitors", "pings", created["id"], "--page-size", "2", "--limit", "0",
                                    "-o", "json")), f"/api/v1/monitors/{created['id']}/pings/")
    assert [ping["kind"] for ping in pings] == ["fail", "success", "start"]  # newest first
    assert served == 2
    assert cli.ok("monitors", "show", created["id"], "-o", "json")["state"] == "down"
    assert [m["id"] for m in cli.ok("monitors", "list", "--state", "down", "-o", "json")] == [created["id"]]
    assert cli.ok("monitors", "list", "--state", "up", "-o", "json") == []


def test_a_refused_monitor_and_another_tenants_monitor(cli, other_tenant):
    refused = cli("monitors", "create", "--name", "x", "--cron", "not a cron")
    assert refused.code == 1 and refused.err.startswith("Error: invalid_cron (HTTP 400)")
    once = cli("monitors", "create", "--name", "x", "--at", "2030-01-01T00:00:00Z")
    assert once.code == 2 and "--cron or --every" in once.err

    with transaction.atomic():
        theirs = services.create_monitor(project=other_tenant.project, name="theirs", schedule_type="interval",
                                         interval_seconds=600, timezone="UTC")
    for command in ("show", "pause", "pings"):
        result = cli("monitors", command, theirs.pk)
        assert result.code == 4 and "not_found" in result.err, (command, result.err)
    assert cli("monitors", "delete", theirs.pk, "--yes").code == 4
    assert Monitor.objects.get(pk=theirs.pk).state != "paused"
