"""Heartbeat monitors on PostgreSQL: pings in every form, the state machine with exact
datetimes (apps.monitors.clock), notifications once per change, plan limits, API tenancy."""

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from apps.monitors import clock, pings, usage
from apps.monitors.models import BODY_LIMIT, Monitor, Ping
from apps.monitors.services import create_monitor
from apps.notifications.models import Channel, Notification
from tests.conftest import utc

pytestmark = pytest.mark.django_db


@pytest.fixture
def monitor(tenant):
    return create_monitor(project=tenant.project, name="backup", schedule_type="interval", interval_seconds=3600,
                          grace_seconds=600)


@pytest.fixture
def channel(tenant):
    return Channel.objects.create(organization=tenant.organization, project=tenant.project, kind="email",
                                  name="ops", config={"to": ["ops@example.com"]})


def ping_at(monitor, kind, now, **fields):
    target = pings.find(monitor.ping_id)
    return pings.record(target, pings.PingInput(kind=kind, **fields), now)


def test_success_ping_sets_up_and_deadlines(monitor):
    now = utc(2026, 12, 3, 10, 0)
    result = ping_at(monitor, "success", now)
    monitor.refresh_from_db()
    assert (result.old_state, result.new_state) == ("new", "up")
    assert monitor.next_expected_at == utc(2026, 12, 3, 11, 0)
    assert monitor.deadline_at == utc(2026, 12, 3, 11, 10)


def test_late_then_down_once_with_one_notification_and_recovery(monitor, channel):
    ping_at(monitor, "success", utc(2026, 12, 3, 10, 0))
    assert clock.check_monitors(utc(2026, 12, 3, 10, 59, 59)) == (0, 0)
    assert clock.check_monitors(utc(2026, 12, 3, 11, 0)) == (1, 0)
    assert Monitor.objects.get(pk=monitor.pk).state == "late"
    assert clock.check_monitors(utc(2026, 12, 3, 11, 10)) == (0, 1)
    assert clock.check_monitors(utc(2026, 12, 3, 11, 20)) == (0, 0)
    assert Monitor.objects.get(pk=monitor.pk).state == "down"
    assert list(Notification.objects.values_list("event", flat=True)) == ["failure"]
    result = ping_at(monitor, "success", utc(2026, 12, 3, 11, 30))
    assert (result.old_state, result.new_state) == ("down", "up")
    assert sorted(Notification.objects.values_list("event", flat=True)) == ["failure", "recovery"]


def test_fail_ping_goes_down_and_notifies(monitor, channel):
    ping_at(monitor, "success", utc(2026, 12, 3, 10, 0))
    ping_at(monitor, "fail", utc(2026, 12, 3, 10, 5), exit_code=3)
    monitor.refresh_from_db()
    assert monitor.state == "down" and monitor.deadline_at is None
    assert Notification.objects.filter(event="failure").count() == 1


def test_rid_pairs_start_and_end(monitor):
    ping_at(monitor, "start", utc(2026, 12, 3, 10, 0), rid="a")
    ping_at(monitor, "start", utc(2026, 12, 3, 10, 1), rid="b")
    result = ping_at(monitor, "success", utc(2026, 12, 3, 10, 0, 42), rid="a")
    assert result.duration_ms == 42_000
    result = ping_at(monitor, "success", utc(2026, 12, 3, 10, 2), rid="b")
    assert result.duration_ms == 60_000


def test_paused_monitor_is_never_down(monitor):
    from apps.monitors.services import pause_monitor

    ping_at(monitor, "success", utc(2026, 12, 3, 10, 0))
    pause_monitor(monitor)
    assert clock.check_monitors(utc(2026, 12, 4)) == (0, 0)


@pytest.mark.parametrize("suffix, kind, code", [("", "success", None), ("/start", "start", None),
                                                ("/fail", "fail", None), ("/0", "success", 0), ("/7", "fail", 7)])
@pytest.mark.parametrize("method", ["get", "post", "head"])
def test_ping_urls(monitor, suffix, kind, code, method):
    response = getattr(Client(enforce_csrf_checks=True), method)(f"/ping/{monitor.ping_id}{suffix}")
    assert response.status_code == 200
    ping = Ping.objects.get(monitor=monitor)
    assert (ping.kind, ping.exit_code, ping.method) == (kind, code, method.upper())


@pytest.mark.parametrize("suffix", ["/abc", "/999", "/256", "/FAIL", "/start/extra", "/-1", "/٣"])
def test_unknown_ping_suffixes_answer_the_json_error(monitor, suffix):
    from apps.monitors.fastlane import PING_URL

    assert PING_URL.fullmatch(f"/ping/{monitor.ping_id}{suffix}")  # the fast lane answers it the same way
    response = Client().get(f"/ping/{monitor.ping_id}{suffix}")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == "not_found" and "/start" in response.json()["error"]["message"]
    assert not Ping.objects.filter(monitor=monitor).exists()


def test_body_is_capped(monitor):
    body = b"x" * (BODY_LIMIT + 500)
    response = Client().post(f"/ping/{monitor.ping_id}", data=body, content_type="text/plain")
    assert response.status_code == 200 and response.content == b"OK"
    assert len(Ping.objects.get(monitor=monitor).body) == BODY_LIMIT


def test_unknown_ping_id_and_exit_code(monitor):
    assert Client().get("/ping/nope").json()["error"]["code"] == "not_found"
    assert Client().get(f"/ping/{monitor.ping_id}/256").status_code == 404


def test_pings_are_metered_and_limited(monitor, tenant):
    from apps.executions.models import UsageMonth

    plan = tenant.organization.plan
    plan.monitor_pings_per_month = 2
    plan.save()
    assert Client().get(f"/ping/{monitor.ping_id}").status_code == 200
    assert Client().get(f"/ping/{monitor.ping_id}").status_code == 200
    response = Client().get(f"/ping/{monitor.ping_id}")
    assert response.status_code == 429 and response.json()["error"]["code"] == "ping_quota_exceeded"
    assert not UsageMonth.objects.filter(organization=tenant.organization).exists()  # counted in the process
    assert usage.flush() == 2
    assert UsageMonth.objects.get(organization=tenant.organization).pings == 2
    assert Client().get(f"/ping/{monitor.ping_id}").json()["error"]["code"] == "ping_quota_exceeded"  # stored


def test_a_cached_target_with_an_old_schedule_is_read_again(monitor):
    assert Client().get(f"/ping/{monitor.ping_id}").status_code == 200  # the process caches its Target
    Monitor.objects.filter(pk=monitor.pk).update(interval_seconds=60, grace_seconds=30)
    before = timezone.now()
    assert Client().get(f"/ping/{monitor.ping_id}").status_code == 200
    monitor.refresh_from_db()
    assert before + timedelta(seconds=60) <= monitor.next_expected_at <= timezone.now() + timedelta(seconds=60)
    assert monitor.deadline_at == monitor.next_expected_at + timedelta(seconds=30)
    Monitor.objects.filter(pk=monitor.pk).delete()
    assert Client().get(f"/ping/{monitor.ping_id}").status_code == 404


def test_max_monitors_answers_402(api, tenant):
    plan = tenant.organization.plan
    plan.max_monitors = 1
    plan.save()
    body = {"name": "a", "schedule": {"type": "interval", "seconds": 60}, "grace_seconds": 30}
    assert api.post("/api/v1/monitors/", body, format="json").status_code == 201
    response = api.post("/api/v1/monitors/", body, format="json")
    assert response.status_code == 402
    assert response.json()["error"]["code"] == "plan_limit" and response.json()["error"]["limit"] == "max_monitors"


def test_api_crud_and_tenancy(api, other_api, monitor):
    listed = api.get("/api/v1/monitors/").json()
    assert [m["id"] for m in listed["results"]] == [str(monitor.id)]
    url = f"/api/v1/monitors/{monitor.id}/"
    for call in (other_api.get(url), other_api.patch(url, {"name": "x"}, format="json"), other_api.delete(url),
                 other_api.post(url + "pause/"), other_api.get(url + "pings/")):
        assert call.status_code == 404
    assert other_api.get("/api/v1/monitors/").json()["results"] == []
    assert api.post(url + "pause/").json()["state"] == "paused"
    assert api.post(url + "resume/").json()["state"] == "new"
    assert api.patch(url, {"schedule": {"type": "cron", "expression": "0 3 * * *"}}, format="json").status_code == 200
    assert api.get(url + "pings/").json()["results"] == []
    assert api.post(url + "badge/").status_code == 201
    assert api.delete(url).status_code == 204


def test_the_badge_api_gives_the_public_svg_url(api, monitor):
    answer = api.post(f"/api/v1/monitors/{monitor.id}/badge/").json()
    path = answer["url"].split("://", 1)[1].partition("/")[2]
    assert path.startswith("badge/monitor/") and path.endswith(".svg"), answer["url"]
    svg = Client().get("/" + path)
    assert svg.status_code == 200 and svg["Content-Type"].startswith("image/svg+xml")


def test_once_schedule_refused(api):
    response = api.post("/api/v1/monitors/", {"name": "a", "schedule": {"type": "once", "at": "2027-01-01T00:00:00Z"}},
                        format="json")
    assert response.status_code == 400


def test_ping_racing_the_down_decision_is_a_recovery(monitor, channel):
    # The ping read the monitor up; the scheduler turned it down before the ping's write:
    # the quick path (no state change expected) must notice and record the recovery.
    ping_at(monitor, "success", utc(2026, 12, 3, 10, 0))
    stale = pings.find(monitor.ping_id)
    assert stale.state == "up"
    assert clock.check_monitors(utc(2026, 12, 3, 11, 10)) == (0, 1)
    result = pings.record(stale, pings.PingInput(kind="success"), utc(2026, 12, 3, 11, 15))
    assert (result.old_state, result.new_state) == ("down", "up")
    assert Monitor.objects.get(pk=monitor.pk).state == "up"
    assert sorted(Notification.objects.values_list("event", flat=True)) == ["failure", "recovery"]
    assert Ping.objects.filter(monitor=monitor).count() == 2


def test_steady_pings_count_in_usage(monitor, tenant):
    from apps.executions.models import UsageMonth

    for minute in range(3):
        ping_at(monitor, "success", utc(2026, 12, 3, 10, minute))
    usage.flush()
    assert UsageMonth.objects.get(organization=tenant.organization).pings == 3
    assert Monitor.objects.get(pk=monitor.pk).last_ping_at == utc(2026, 12, 3, 10, 2)


def test_pings_per_minute_limit(monitor, tenant):
    from apps.api import ratelimit

    plan = tenant.organization.plan
    plan.monitor_pings_per_minute = 2
    plan.save()
    ratelimit.reset("monitor-pings", tenant.organization.pk, window=60)
    statuses = [Client().get(f"/ping/{monitor.ping_id}").status_code for _ in range(3)]
    assert statuses[:2] == [200, 200]
    response = Client().get(f"/ping/{monitor.ping_id}")
    assert response.status_code == 429 and response.json()["error"]["code"] == "ping_rate_limited"
    assert int(response["Retry-After"]) >= 1
    assert Ping.objects.filter(monitor=monitor).count() == 2


@pytest.fixture
def keep_test_connection():
    """The test's transaction must outlive the handler's requests (Django's test client
    disconnects close_old_connections the same way)."""
    from django.core.signals import request_finished, request_started
    from django.db import close_old_connections

    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


def test_fast_lane_serves_pings_without_the_pages_middleware(monitor, keep_test_connection):
    import io

    from apps.monitors.fastlane import PingFastLane

    def other(environ, start_response):
        start_response("204 No Content", [])
        return [b""]

    lane = PingFastLane(other)

    def call(path, method="GET", query="", body=b"", **extra):
        environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query, "SERVER_NAME": "testserver",
                   "SERVER_PORT": "80", "HTTP_HOST": "testserver", "wsgi.input": io.BytesIO(body),
                   "CONTENT_LENGTH": str(len(body)), "wsgi.url_scheme": "http", "wsgi.errors": io.StringIO(),
                   "REMOTE_ADDR": "127.0.0.1", "HTTP_USER_AGENT": "backup.sh", **extra}
        answer = {}
        content = b"".join(lane(environ, lambda status, headers: answer.update(status=status, headers=headers)))
        return answer["status"], dict(answer["headers"]), content

    status, headers, content = call(f"/ping/{monitor.ping_id}", HTTP_X_REQUEST_ID="job-42")
    assert (status, content) == ("200 OK", b"OK")
    assert headers["Content-Length"] == "2" and headers["X-Request-Id"] == "job-42"
    assert headers["X-Content-Type-Options"] == "nosniff" and headers["Referrer-Policy"] == "same-origin"
    assert "Content-Security-Policy" not in headers and "Vary" not in headers  # no CSP, no session
    assert call(f"/ping/{monitor.ping_id}/start", query="rid=r1")[0] == "200 OK"
    assert call(f"/ping/{monitor.ping_id}/3", method="POST", query="rid=r1", body=b"disk full")[0] == "200 OK"
    status, headers, content = call(f"/ping/{monitor.ping_id}", method="HEAD")
    assert (status, content, headers["Content-Length"]) == ("200 OK", b"", "2")
    end = Ping.objects.filter(monitor=monitor).order_by("-id").values("kind", "exit_code", "rid", "body",
                                                                      "user_agent", "duration_ms")[1]
    assert end | {"duration_ms": end["duration_ms"] is not None} == {
        "kind": "fail", "exit_code": 3, "rid": "r1", "body": "disk full", "user_agent": "backup.sh",
        "duration_ms": True}
    assert Ping.objects.filter(monitor=monitor).count() == 4
    status, headers, content = call("/ping/unknown")
    assert status.startswith("404") and headers["Content-Type"] == "application/json"
    assert json.loads(content)["error"]["code"] == "not_found"
    status, _, content = call(f"/ping/{monitor.ping_id}", method="PUT")
    assert status.startswith("405") and json.loads(content)["error"]["code"] == "method_not_allowed"
    # over the request limits: Django's ping handler answers, with the site's error
    status, _, content = call(f"/ping/{monitor.ping_id}", method="POST", CONTENT_LENGTH=str(10**9))
    assert status.startswith("413") and b"at most" in content
    assert call("/healthz")[0] == "204 No Content"
    assert Ping.objects.filter(monitor=monitor).count() == 4


def test_pings_past_the_plan_retention_are_purged(make_tenant):
    from apps.billing.tasks import purge_expired
    from apps.monitors.retention import purge_pings

    free, pro = make_tenant(plan="free"), make_tenant(plan="pro")
    now = utc(2026, 12, 3, 12, 0)
    kept, purged = {}, {}
    for tenant in (free, pro):
        monitor = create_monitor(project=tenant.project, name="m", schedule_type="interval", interval_seconds=60,
                                 grace_seconds=60)
        days = tenant.organization.plan.retention_days
        for age in (days + 2, days + 1, days - 1, 0):
            ping_at(monitor, "success", now - timedelta(days=age))
        kept[monitor.pk] = [now - timedelta(days=days - 1), now]
        purged[monitor.pk] = monitor
    assert free.organization.plan.retention_days != pro.organization.plan.retention_days
    assert purge_pings(now=now, batch_size=1) == 4
    for pk, times in kept.items():
        assert sorted(Ping.objects.filter(monitor_id=pk).values_list("created_at", flat=True)) == times
    assert Monitor.objects.filter(pk__in=kept, last_ping_at=now).count() == 2  # the state stays
    assert purge_expired() == 0  # the housekeeping task runs it (nothing left past today's cutoff)


def test_statement_shows_the_months_pings(tenant):
    from datetime import date

    from apps.billing.models import Statement
    from apps.billing.statements import generate_statements
    from apps.executions.models import UsageMonth

    UsageMonth.objects.create(organization=tenant.organization, month=date(2030, 1, 1), runs=10, pings=4321)
    generate_statements(date(2030, 1, 1), now=utc(2030, 2, 1, 1, 0))
    lines = Statement.objects.get(organization=tenant.organization).lines
    ping_line = next(line for line in lines if "pings" in line["description"])
    assert (ping_line["quantity"], ping_line["amount_cents"]) == (4321, 0)


def test_seeded_plans_carry_the_monitor_limits(db):
    from apps.plans.models import Plan
    from tests.conftest import ensure_seeded_plans

    Plan.objects.update(max_monitors=0)
    ensure_seeded_plans()
    limits = dict(Plan.objects.values_list("code", "max_monitors"))
    assert limits["free"] < limits["pro"] < limits["business"] < limits["enterprise"]


def test_monitor_api_is_in_the_openapi_schema_with_its_errors(db):
    import yaml
    from rest_framework.test import APIClient

    schema = APIClient().get("/api/v1/schema/")
    assert schema.status_code == 200

    paths = yaml.safe_load(schema.content)["paths"]
    create = paths["/api/v1/monitors/"]["post"]["responses"]
    assert {"201", "400", "402"} <= set(create)
    assert {"200", "404"} <= set(paths["/api/v1/monitors/{id}/"]["get"]["responses"])
    assert "/api/v1/monitors/{id}/pings/" in paths and "/api/v1/monitors/{id}/pause/" in paths


def test_admin_pages_answer(admin_client, monitor):
    ping_at(monitor, "start", utc(2026, 12, 3, 10, 0), rid="r")
    ping = Ping.objects.get(monitor=monitor)
    for url in ("/admin/monitors/monitor/", f"/admin/monitors/monitor/{monitor.pk}/change/",
                "/admin/monitors/monitor/add/", "/admin/monitors/ping/", f"/admin/monitors/ping/{ping.pk}/change/",
                "/admin/monitors/monitor/?state=up", "/admin/monitors/monitor/?q=backup"):
        assert admin_client.get(url).status_code == 200, url
    response = admin_client.post("/admin/monitors/monitor/", {"action": "pause", "_selected_action": [monitor.pk]})
    assert response.status_code == 302 and Monitor.objects.get(pk=monitor.pk).state == "paused"


def test_a_start_without_its_end_within_the_grace_goes_down(monitor, channel):
    ping_at(monitor, "success", utc(2026, 12, 3, 10, 0))  # next expected 11:00, down at 11:10
    ping_at(monitor, "start", utc(2026, 12, 3, 10, 30))  # the run must end by 10:40
    assert Monitor.objects.get(pk=monitor.pk).deadline_at == utc(2026, 12, 3, 10, 40)
    assert clock.check_monitors(utc(2026, 12, 3, 10, 39)) == (0, 0)
    assert clock.check_monitors(utc(2026, 12, 3, 10, 40)) == (0, 1)
    assert list(Notification.objects.values_list("event", flat=True)) == ["failure"]


def test_a_new_monitor_started_and_then_silent_goes_down_after_the_grace(monitor, channel):
    ping_at(monitor, "start", utc(2026, 12, 3, 10, 0))  # never a success: new, the run must end by 10:10
    monitor.refresh_from_db()
    assert (monitor.state, monitor.deadline_at) == ("new", utc(2026, 12, 3, 10, 10))
    assert clock.check_monitors(utc(2026, 12, 3, 10, 9)) == (0, 0)
    assert clock.check_monitors(utc(2026, 12, 3, 10, 10)) == (0, 1)
    assert clock.check_monitors(utc(2026, 12, 3, 10, 20)) == (0, 0)  # once
    assert Monitor.objects.get(pk=monitor.pk).state == "down"
    assert list(Notification.objects.values_list("event", flat=True)) == ["failure"]
    result = ping_at(monitor, "success", utc(2026, 12, 3, 10, 30))
    assert (result.old_state, result.new_state) == ("down", "up")


def test_a_new_monitor_without_a_start_never_goes_down(monitor, channel):
    assert clock.check_monitors(utc(2030, 1, 1)) == (0, 0)
    assert Monitor.objects.get(pk=monitor.pk).state == "new"


def test_a_start_while_paused_does_not_take_the_resumed_monitor_down(monitor):
    from apps.monitors.services import pause_monitor, resume_monitor

    pause_monitor(monitor, now=utc(2026, 12, 3, 9, 0))
    ping_at(monitor, "start", utc(2026, 12, 3, 10, 0))
    resume_monitor(monitor, now=utc(2026, 12, 3, 10, 1))
    assert clock.check_monitors(utc(2026, 12, 3, 12, 0)) == (0, 0)
    assert Monitor.objects.get(pk=monitor.pk).state == "new"


def test_a_start_ended_in_time_keeps_the_schedule(monitor):
    ping_at(monitor, "success", utc(2026, 12, 3, 10, 0))
    ping_at(monitor, "start", utc(2026, 12, 3, 10, 55))
    ping_at(monitor, "success", utc(2026, 12, 3, 11, 1))
    monitor.refresh_from_db()
    assert (monitor.state, monitor.deadline_at) == ("up", utc(2026, 12, 3, 12, 11))
    assert clock.check_monitors(utc(2026, 12, 3, 11, 30)) == (0, 0)
