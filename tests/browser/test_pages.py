"""Pages a person enjoys, tried in a real Chromium: every page of these tests logs no console
error (the ``browser`` fixture fails the test on one: a Content-Security-Policy violation
included)."""

import re
import uuid
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone

from apps.executions.models import Execution

from .harness import sign_in, start_web

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.xdist_group("browser")]

PASSWORD = "a long browser password"
TIMEOUT_MS = 30_000


@pytest.fixture
def signed_in(tmp_path, static_root, browser, make_tenant):
    """A page of a browser signed in as the owner of a new tenant, and the web process."""
    tenant = make_tenant(plan="pro", email=f"pages-{uuid.uuid4().hex[:6]}@example.com")
    tenant.owner.set_password(PASSWORD)
    tenant.owner.save()
    web = start_web(tmp_path, static_root)
    context, page = sign_in(browser, web, tenant.owner, PASSWORD, TIMEOUT_MS, viewport={"width": 1280, "height": 900})
    try:
        yield page, web, tenant
    except BaseException:
        print(web.process.output()[-3000:])
        raise
    finally:
        context.close()
        web.stop()


def _runs(job, errors):
    now = timezone.now()
    Execution.objects.bulk_create([
        Execution(job=job, organization=job.organization, scheduled_for=now - timedelta(minutes=i + 1),
                  status="failed", error_kind="http", error_message=error)
        for i, error in enumerate(errors)])


def test_history_search_keeps_what_is_typed_and_the_refresh_waits(signed_in, make_job):
    page, web, tenant = signed_in
    job = make_job(tenant)
    _runs(job, ["the request timed out", "connection refused"])
    page.clock.install()  # timers (the list's refresh, htmx delays) move only when the test says
    polls = []
    page.on("request", lambda request: request.headers.get("hx-trigger") == "history-list" and polls.append(request))
    page.goto(web.url(f"/jobs/{job.pk}/"))
    page.clock.run_for(6_000)
    page.wait_for_timeout(300)  # let a poll's request leave (real time: the network is real)
    assert polls, "the history refreshes itself while nobody uses it"

    search = page.get_by_label("Search errors and responses")
    search.click()
    polls.clear()
    for char in "timed out":  # a refresh due between every key typed
        search.press(char if char != " " else "Space")
        page.clock.run_for(6_000)
    page.locator("#history-list tbody tr").first.wait_for()
    page.wait_for_function("() => document.querySelectorAll('#history-list tbody tr').length === 1")
    # "timed " finds the same one run: wait for the list the last search ("timed out") drew.
    page.wait_for_function("() => decodeURIComponent(document.querySelector('#history-list').getAttribute('hx-get')"
                           ".replace(/\\+/g, ' ')).includes('timed out')")
    assert search.input_value() == "timed out"
    assert polls == [], "no refresh while the search box has the focus"

    page.get_by_role("heading", name="History").click()  # the focus leaves the filters (a change: one more search)
    page.wait_for_function("() => !document.querySelector('#history-filters').classList.contains('htmx-request')")
    page.clock.run_for(6_000)
    page.wait_for_timeout(300)
    assert polls
    assert "timed out" in polls[-1].url.replace("+", " ").replace("%20", " ")  # the refresh keeps the search

    polls.clear()
    page.evaluate("() => Object.defineProperty(document, 'hidden', {configurable: true, get: () => true})")
    page.clock.run_for(12_000)
    page.wait_for_timeout(300)
    assert polls == [], "no refresh while the tab is hidden"


CHART_FACTS = """() => [...document.querySelectorAll('canvas[data-chart]')].map(canvas => {
  const chart = canvas._chart, x = chart.scales.x;
  chart.ctx.save();
  chart.ctx.font = Chart.helpers.toFont(x.options.ticks.font).string;
  const ticks = x.ticks.map((tick, i) => {
    const lines = [].concat(tick.label);
    const width = Math.max(...lines.map(line => chart.ctx.measureText(line).width));
    const iso = JSON.parse(document.getElementById(canvas.dataset.chart).textContent).labels[tick.value];
    return {label: lines.join(' '), iso, left: x.getPixelForTick(i) - width / 2, right: x.getPixelForTick(i) + width / 2};
  });
  chart.ctx.restore();
  const values = chart.data.datasets[0].data;
  const points = chart.getDatasetMeta(0).data.filter((p, i) => values[i] != null)
    .map(p => ({x: p.x, y: p.y, radius: p.options.radius}));
  return {kind: canvas.dataset.kind, title: x.options.title.text, ticks, points,
          area: {top: chart.chartArea.top, bottom: chart.chartArea.bottom}, height: chart.height};
})"""


def _one_run(job, hours_ago=3):
    at = timezone.now() - timedelta(hours=hours_ago)
    Execution.objects.create(job=job, organization=job.organization, scheduled_for=at, status="succeeded",
                             started_at=at, finished_at=at + timedelta(milliseconds=240), duration_ms=240)


def _clock(iso, twelve_hours):
    """The time of ``iso`` in Tokyo as a tick reads it (spaces as plain ones, no leading 0)."""
    local = datetime.fromisoformat(iso).astimezone(ZoneInfo("Asia/Tokyo"))
    if twelve_hours:
        return f"{local.hour % 12 or 12}:{local.minute:02d} {'AM' if local.hour < 12 else 'PM'}"
    return f"{local.hour}:{local.minute:02d}"


@pytest.mark.parametrize("locale, twelve_hours", [("en-US", True), ("en-GB", False)])
def test_charts_in_the_jobs_timezone_and_the_viewers_clock_with_one_run_visible(
        tmp_path, static_root, browser, make_tenant, make_job, locale, twelve_hours):
    tenant = make_tenant(plan="pro", email=f"charts-{uuid.uuid4().hex[:6]}@example.com")
    tenant.owner.set_password(PASSWORD)
    tenant.owner.save()
    job = make_job(tenant, timezone="Asia/Tokyo", name="once", last_run_at=timezone.now())
    _one_run(job)
    web = start_web(tmp_path, static_root)
    context, page = sign_in(browser, web, tenant.owner, PASSWORD, TIMEOUT_MS, viewport={"width": 390, "height": 900},
                            locale=locale, timezone_id="America/New_York")
    try:
        for width in (390, 1280):  # a phone and a desktop: labels never overlap
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(web.url(f"/jobs/{job.pk}/"))
            page.wait_for_function("() => [...document.querySelectorAll('canvas[data-chart]')].every(c => c._chart)")
            for chart in page.evaluate(CHART_FACTS):
                assert chart["title"] == "Time (Asia/Tokyo)"
                ticks = chart["ticks"]
                assert len(ticks) >= 3, chart
                for before, after in zip(ticks, ticks[1:]):
                    assert before["right"] <= after["left"], f"{before['label']!r} overlaps {after['label']!r} at {width}px"
                labels = " ".join(tick["label"] for tick in ticks)
                assert ("AM" in labels or "PM" in labels) == twelve_hours, labels
                [point] = chart["points"] if chart["kind"] == "success" else chart["points"][:1]
                assert point["radius"] >= 3 and chart["area"]["top"] - point["radius"] <= point["y"] <= chart["area"]["bottom"], chart
                assert point["y"] - point["radius"] >= 0, "the single run's dot is not cut at the top"
                # Each tick reads its time in Tokyo, not in the viewer's New York.
                for tick in ticks:
                    label = re.sub(r"^0(?=\d)", "", tick["label"].replace("\u202f", " "))
                    assert label.startswith(_clock(tick["iso"], twelve_hours)), tick
    finally:
        context.close()
        web.stop()


def test_monitor_pages_copy_presets_and_preview_and_the_dashboard_shows_them(signed_in):
    page, web, tenant = signed_in
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=web.base_url)
    page.goto(web.url("/monitors/new/"))
    page.get_by_label("Name").fill("Nightly backup")
    page.get_by_label("Cron expression").fill("0 3 * * *")
    page.get_by_label("Timezone").fill("asia/tokyo")
    page.get_by_role("group", name="Grace presets").get_by_role("button", name="15 minutes").click()
    assert page.get_by_label("Grace period (seconds)").input_value() == "900"
    preview = page.locator("#monitor-preview")
    # The preview follows what is typed: Tokyo's 03:00, down if silent by 03:15.
    page.wait_for_function("() => { const text = document.getElementById('monitor-preview').textContent;"
                           " return text.includes('(Asia/Tokyo)') && text.includes(' 03:15'); }")
    assert preview.locator("li").count() == 5
    page.get_by_role("button", name="Create the monitor").click()
    page.get_by_role("heading", name="Nightly backup").wait_for()
    assert page.locator("h1 .badge").text_content() == "New (no ping yet)"
    ping_url = page.locator("#ping-url").inner_text()
    page.get_by_role("button", name="Copy the ping URL").click()
    page.get_by_role("button", name="Copied").wait_for()
    assert page.evaluate("() => navigator.clipboard.readText()") == ping_url

    page.goto(web.url("/"))
    page.locator("#monitors").get_by_role("link", name="Nightly backup").wait_for()
    assert "1 new" in page.locator(".overview").text_content()


def test_the_run_page_copies_its_request_as_curl_and_runs_again(signed_in, make_job):
    page, web, tenant = signed_in
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=web.base_url)
    from apps.executions.models import Attempt

    job = make_job(tenant, name="curl me", last_run_at=timezone.now())
    now = timezone.now()
    execution = Execution.objects.create(job=job, organization=job.organization, scheduled_for=now, status="failed",
                                         attempt=1, started_at=now, finished_at=now)
    Attempt.objects.create(execution=execution, number=1, started_at=now, finished_at=now, duration_ms=9,
                           request_method="POST", request_url="https://example.com/hook",
                           request_headers={"Authorization": "Bearer s3cr3t"}, request_body="{}",
                           response_status=503, outcome="failed")
    page.goto(web.url(f"/executions/{execution.pk}/"))
    page.get_by_role("button", name="Copy as curl").click()
    page.get_by_role("button", name="Copied").wait_for()
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert copied.startswith("curl -X POST https://example.com/hook") and "s3cr3t" not in copied
    assert "Authorization: ••••" in copied
    page.get_by_role("button", name="Run again").click()
    page.get_by_text("Run started").wait_for()
    assert job.executions.count() == 2


def test_the_job_form_opens_short_and_a_huge_body_gets_its_field_error(signed_in, console):
    page, web, tenant = signed_in
    page.goto(web.url("/jobs/new/"))
    for section in ("#workflow-section", "#retry-section", "#misfire-section", "#window-section", "#request-options"):
        assert page.locator(section).get_attribute("open") is None, section
    assert not page.get_by_label("Attempts").is_visible()
    page.locator("#id_name").fill("Huge body")
    page.locator("#id_url").fill("https://example.com/hook")
    page.get_by_text("Headers, body, authentication and timeout").click()
    page.locator("#id_body").evaluate("(el) => { el.value = 'x'.repeat(2 * 1024 * 1024); }")
    console.expect_status(400)  # a refused form answers 400: the answer the test wants
    page.get_by_role("button", name="Create job").click()
    page.locator("#id_body-error").wait_for()
    assert "Far too long" in page.locator("#id_body-error").inner_text()
    assert page.locator("#request-options").get_attribute("open") is not None  # opened on its error
    assert page.locator("#id_name").input_value() == "Huge body"
