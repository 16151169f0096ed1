"""A newcomer's first minutes, in a real browser against the real processes.

Sign up, create a project and a cron job through the form (a validation error first),
see the preview, try the request, trigger the job and watch the target's response arrive
in the history, pause it, create and revoke an API key, import a crontab; a second user
of another organization gets a 404 on the first user's job.

On failure, screenshots of the dashboard and the job page (and of the page the test was
on) are saved under test-output/.
"""

import os
import re
import shutil
import uuid

import pytest
import requests

from apps.jobs.models import Job
from apps.plans.models import Plan
from tests.conftest import ensure_seeded_plans
from tests.support.processes import start_scheduler, start_worker

from .harness import LOCAL_TARGETS, OUTPUT, sign_in, start_web
from .seed import seed_history

# One Chromium at a time: both tests go to the same xdist worker (--dist loadgroup).
pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.xdist_group("browser")]

PASSWORD = "a long browser password"
WIDEST_ELEMENT = """() => {
  let widest = null;
  for (const el of document.querySelectorAll("body *")) {
    const right = el.getBoundingClientRect().right;
    if (!widest || right > widest.right) widest = {right, tag: el.tagName, cls: el.className, text: el.textContent.slice(0, 60)};
  }
  return widest;
}"""
TIMEOUT_MS = 30_000


def private_free_queue():
    """Runs of free-plan tenants go to a queue no other test consumes."""
    queue = f"test.browser.{uuid.uuid4().hex[:10]}"
    Plan.objects.filter(code="free").update(queue=queue)
    return queue


def sign_up(page, web, organization, email):
    page.goto(web.url("/signup/"))
    page.get_by_label("Organization name").fill(organization)
    page.get_by_label("E-mail address").fill(email)
    page.get_by_label("Password", exact=True).fill(PASSWORD)
    page.get_by_label("Password again").fill(PASSWORD)
    page.get_by_role("button", name="Sign up").click()
    page.get_by_role("heading", name="Welcome to cronsvc").wait_for()
    assert page.locator("#first-key").inner_text().startswith("csk_live_")


def save_screenshots(page, web, name, job_url=None):
    OUTPUT.mkdir(exist_ok=True)
    try:
        page.screenshot(path=str(OUTPUT / f"{name}-last-page.png"), full_page=True)
        page.goto(web.url("/"))
        page.screenshot(path=str(OUTPUT / f"{name}-dashboard.png"), full_page=True)
        if job_url:
            page.goto(job_url)
            page.screenshot(path=str(OUTPUT / f"{name}-job.png"), full_page=True)
    except Exception as exc:  # the screenshots must not hide the real failure
        print(f"could not save screenshots: {exc}")


def test_sign_up_to_first_fired_job(tmp_path, static_root, browser, console, target):
    ensure_seeded_plans()
    queue = private_free_queue()
    web = start_web(tmp_path, static_root)
    scheduler = start_scheduler(tmp_path, **LOCAL_TARGETS)
    worker = start_worker(tmp_path, [queue], **LOCAL_TARGETS)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    job_url = None
    try:
        # Sign up: an organization on the free plan with its default project.
        email = f"ada-{uuid.uuid4().hex[:8]}@example.com"
        sign_up(page, web, "Analytical Engines", email)

        # A project of its own.
        page.get_by_role("link", name="Settings").click()
        page.locator("#id_project_name").fill("Browser project")
        page.locator("#id_project_timezone").fill("Europe/Berlin")
        page.get_by_role("button", name="Create project").click()
        page.get_by_text("Project “Browser project” created.").wait_for()

        # The job form: a validation error first, beside its field, with the API's message
        # (the form answers 400, which the browser logs as a failed load: expected).
        console.expect_status(400)
        page.get_by_role("link", name="New job", exact=True).first.click()
        page.locator("#id_name").fill("Ping the target")
        page.locator("#id_project").select_option(label="Browser project")
        page.locator("#id_cron_expression").fill("61 * * * *")
        page.locator("#id_url").fill(target.url("/hook"))
        page.get_by_role("button", name="Create job").click()
        error = page.locator("#id_cron_expression-error")
        error.wait_for()
        assert "61" in error.inner_text()
        assert page.locator("#id_cron_expression").get_attribute("aria-invalid") == "true"

        # Fixed: the live preview describes the schedule and lists the next 5 runs.
        page.locator("#id_cron_expression").fill("0 * * * *")
        preview = page.locator("#schedule-preview")
        preview.get_by_text("Every hour (Europe/Berlin)").wait_for()
        assert preview.locator("ol li").count() == 5

        # "Test run now" sends one request and shows the response inline; nothing is saved.
        page.get_by_role("button", name="Test run now").click()
        result = page.locator("#test-run-result")
        result.get_by_text("HTTP 200").first.wait_for()
        assert '"path": "/hook"' in result.inner_text()
        assert Job.objects.count() == 0

        page.get_by_role("button", name="Create job").click()
        page.get_by_role("heading", name=re.compile("Ping the target")).wait_for()
        job_url = page.url
        job = Job.objects.get(name="Ping the target")
        assert job.project.name == "Browser project" and job.timezone == "Europe/Berlin"

        # Trigger it and watch the target's response appear in the history (htmx polling).
        page.get_by_role("button", name="Run now").click()
        history = page.locator("#history-list")
        history.get_by_text("HTTP 200").first.wait_for(timeout=60_000)
        history.locator("td .badge", has_text="Succeeded").first.wait_for()
        assert '"path": "/hook"' in history.locator(".response-excerpt").first.inner_text()
        assert len(target.requests_to("/hook")) == 2  # the test run and the triggered run
        history.locator("details summary").first.click()
        history.get_by_text("Attempt 1").wait_for()

        # Pause it.
        page.get_by_role("button", name="Pause").click()
        page.get_by_role("button", name="Resume").wait_for()
        assert page.locator("h1 .badge").inner_text().lower() == "paused"
        job.refresh_from_db()
        assert not job.enabled

        # An API key: created (shown once), used, revoked.
        page.get_by_role("link", name="Settings").click()
        page.get_by_role("link", name="API keys").click()
        page.locator("#id_key_name").fill("browser key")
        page.get_by_role("button", name="Create key").click()
        full_key = page.locator("#new-key-value").inner_text().strip()
        api = requests.get(web.url("/api/v1/jobs/"), headers={"Authorization": f"Bearer {full_key}"}, timeout=10)
        assert api.status_code == 200 and api.json()["results"][0]["name"] == "Ping the target"
        page.goto(web.url("/settings/api-keys/"))
        assert full_key not in page.content()
        row = page.locator("tr.api-key-row[data-key-name='browser key']")
        row.get_by_role("button", name="Revoke").click()
        page.locator("tr.api-key-row[data-key-name='browser key']").get_by_text("revoked").wait_for()
        api = requests.get(web.url("/api/v1/jobs/"), headers={"Authorization": f"Bearer {full_key}"}, timeout=10)
        assert api.status_code == 401

        # Import a crontab: preview, then create.
        page.get_by_role("link", name="Import crontab").click()
        page.locator("#id_project").select_option(label="Browser project (Europe/Berlin)")
        page.locator("#id_crontab").fill(
            "0 4 * * * curl -fsS https://example.com/nightly\n"
            "30 5 * * 1-5 wget -q -O- https://example.com/weekdays\n"
            "15 4 * * * /usr/local/bin/backup.sh\n")
        page.get_by_role("button", name="Preview").click()
        page.get_by_text("Preview: 2 jobs would be created, 1 line skipped").wait_for()
        page.get_by_role("button", name="Create jobs").click()
        page.get_by_role("heading", name=re.compile("2 jobs created")).wait_for()
        assert Job.objects.filter(project__name="Browser project").count() == 3

        # Another organization's user cannot open the job: 404.
        stranger = browser.new_context(viewport={"width": 390, "height": 844})
        stranger.set_default_timeout(TIMEOUT_MS)
        other = stranger.new_page()
        try:
            sign_up(other, web, "Someone Else", f"eve-{uuid.uuid4().hex[:8]}@example.com")
            console.expect_status(404)
            response = other.goto(job_url)
            assert response.status == 404
            other.get_by_role("heading", name="Not found").wait_for()
            assert "Ping the target" not in other.content()
        finally:
            stranger.close()
    except BaseException:
        save_screenshots(page, web, "journey", job_url)
        for process in (web.process, scheduler, worker):
            print(f"--- {process.log_path.name}\n{process.output()[-3000:]}")
        raise
    finally:
        context.close()
        codes = worker.stop(), scheduler.stop(), web.stop()
    assert codes[:2] == (0, 0), worker.output()[-3000:]


def test_screenshots_of_seeded_pages(tmp_path, static_root, browser, console, make_tenant):
    """The README's two screenshots, from a week of seeded history. Written to test-output/;
    with CRONSVC_UPDATE_SCREENSHOTS=1 also copied to docs/dashboard.png and docs/job.png."""
    tenant = make_tenant(plan="pro", name="Acme Rockets", email=f"ops-{uuid.uuid4().hex[:6]}@example.com")
    tenant.owner.set_password(PASSWORD)
    tenant.owner.save()
    jobs = seed_history(tenant.organization, url="https://api.acme.example/hooks/run")
    failing = next(job for job in jobs if job.name == "Sync exchange rates")
    web = start_web(tmp_path, static_root)
    context, page = sign_in(browser, web, tenant.owner, PASSWORD, TIMEOUT_MS, viewport={"width": 1280, "height": 900},
                            device_scale_factor=1)
    try:
        OUTPUT.mkdir(exist_ok=True)
        page.screenshot(path=str(OUTPUT / "dashboard.png"), full_page=True)
        page.set_viewport_size({"width": 1280, "height": 1500})
        page.goto(web.url(f"/jobs/{failing.pk}/"))
        page.wait_for_function("() => document.querySelectorAll('canvas[data-chart]').length === 2 && "
                               "[...document.querySelectorAll('canvas[data-chart]')].every(c => c._chart)")
        page.screenshot(path=str(OUTPUT / "job.png"), full_page=False)
        # Phone width: nothing runs off the screen (the last page is a 404 on purpose).
        console.expect_status(404)
        page.set_viewport_size({"width": 390, "height": 844})
        for path in ("/", f"/jobs/{failing.pk}/", f"/jobs/{failing.pk}/edit/", "/jobs/new/", "/dead-letter/",
                     "/import/", "/monitors/", "/monitors/new/", "/settings/", "/settings/members/",
                     "/settings/api-keys/", "/settings/plan/",
                     f"/settings/projects/{failing.project_id}/signing-secrets/", "/no/such/page/"):
            page.goto(web.url(path))
            overflow = page.evaluate("() => document.documentElement.scrollWidth - window.innerWidth")
            if overflow > 1:
                widest = page.evaluate(WIDEST_ELEMENT)
                page.screenshot(path=str(OUTPUT / "phone-overflow.png"), full_page=True)
                raise AssertionError(f"{path} is {overflow}px wider than a phone screen; widest: {widest}")
    except BaseException:
        save_screenshots(page, web, "screenshots", web.url(f"/jobs/{failing.pk}/"))
        print(web.process.output()[-3000:])
        raise
    finally:
        context.close()
        web.stop()
    if os.environ.get("CRONSVC_UPDATE_SCREENSHOTS") == "1":
        docs = OUTPUT.parent / "docs"
        shutil.copy(OUTPUT / "dashboard.png", docs / "dashboard.png")
        shutil.copy(OUTPUT / "job.png", docs / "job.png")
