"""Monitor pages in the jobs' design (issue 35): state colours, times in the monitor's
timezone, the ping URL with a copy button, period and grace presets, a live preview of the
expected pings; monitors beside the jobs on the dashboard; the usage chart's axes."""

from datetime import datetime, timezone as dt_timezone

import pytest
from django.utils import timezone

from apps.monitors.models import Monitor
from apps.monitors.services import create_monitor

pytestmark = pytest.mark.django_db
HTMX = {"HTTP_HX_REQUEST": "true"}


def html(response):
    assert response.status_code == 200, response.status_code
    return response.content.decode()


@pytest.fixture
def down_monitor(tenant):
    monitor = create_monitor(project=tenant.project, name="nightly backup", schedule_type="cron",
                             cron_expression="0 3 * * *", timezone="Asia/Tokyo", grace_seconds=600)
    Monitor.objects.filter(pk=monitor.pk).update(
        state="down", last_ping_at=datetime(2026, 12, 5, 18, 0, 5, tzinfo=dt_timezone.utc))
    monitor.refresh_from_db()
    return monitor


def test_a_monitors_page_has_state_colours_its_timezone_and_a_copy_button(tenant, owner, down_monitor):
    page = html(owner.get(f"/monitors/{down_monitor.pk}/"))
    assert '<span class="badge bad">Down</span>' in page
    assert "2026-12-06 03:00:05 JST" in page  # 18:00:05 UTC, in the monitor's Asia/Tokyo
    assert '<code id="ping-url">' in page and 'data-copy="ping-url"' in page
    listed = html(owner.get("/monitors/"))
    assert '<span class="badge bad">Down</span>' in listed and "2026-12-06 03:00 JST" in listed


def test_the_monitor_form_has_presets_any_case_timezones_and_a_preview(tenant, owner):
    page = html(owner.get("/monitors/new/"))
    assert 'data-preset="id_interval_seconds" data-value="3600">1 hour<' in page
    assert 'data-preset="id_grace_seconds"' in page and 'hx-post="/monitors/preview/"' in page
    response = owner.post("/monitors/new/", {"name": "lower case", "project": str(tenant.project.pk),
                                             "schedule_type": "cron", "cron_expression": "0 3 * * *",
                                             "interval_seconds": "", "timezone": "asia/tokyo", "grace_seconds": "600"})
    assert response.status_code == 302
    assert Monitor.objects.get(name="lower case").timezone == "Asia/Tokyo"

    preview = html(owner.post("/monitors/preview/", {"project": str(tenant.project.pk), "schedule_type": "cron",
                                                     "cron_expression": "0 3 * * *", "timezone": "Asia/Tokyo",
                                                     "grace_seconds": "600"}, **HTMX))
    assert preview.count("<li>") == 5 and "03:00 JST" in preview and "down if silent by" in preview
    assert "03:10" in preview  # expected at 03:00, down after the 10 min grace
    refused = html(owner.post("/monitors/preview/", {"schedule_type": "cron", "cron_expression": "61 * * * *",
                                                     "timezone": "UTC"}, **HTMX))
    assert "Not a valid schedule yet" in refused and "61" in refused


def test_monitors_are_beside_the_jobs_on_the_dashboard(tenant, owner, make_job, down_monitor):
    make_job(tenant, name="broken job", consecutive_failures=2, last_run_at=timezone.now())
    page = html(owner.get("/"))
    overview = page.split('class="overview"')[1].split("</p>")[0]
    assert "1 failing" in overview and "1 down" in overview
    assert 'id="monitors"' in page and f'href="/monitors/{down_monitor.pk}/"' in page
    polled = html(owner.get("/", **HTMX))  # the refreshed list keeps them
    assert f'href="/monitors/{down_monitor.pk}/"' in polled


def test_the_usage_chart_has_axes_and_a_lone_run_shows(tenant, owner):
    from apps.billing.templatetags.billing import bar_percent

    page = html(owner.get("/settings/plan/"))
    assert 'class="y-axis' in page and 'class="x-axis' in page
    assert bar_percent(1, 5000) > 0 and bar_percent(0, 5000) == 0 and bar_percent(5000, 5000) == 100
