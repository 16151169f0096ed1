"""Pages a person enjoys, tried in a real Chromium: every page of these tests logs no console
error (the ``browser`` fixture fails the test on one: a Content-Security-Policy violation
included)."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions.models import Execution

from .harness import start_web

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
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    context.set_default_timeout(TIMEOUT_MS)
    page = context.new_page()
    page.clock.install()  # timers (the lists' refresh, htmx delays) move only when the test says
    page.goto(web.url("/login/"))
    page.get_by_label("E-mail address").fill(tenant.owner.email)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("heading", name="Jobs", exact=True).wait_for()
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
    assert search.input_value() == "timed out"
    assert polls == [], "no refresh while the search box has the focus"

    page.get_by_role("heading", name="History").click()  # the focus leaves the filters
    page.clock.run_for(6_000)
    page.wait_for_timeout(300)
    assert polls
    assert "timed out" in polls[-1].url.replace("+", " ").replace("%20", " ")  # the refresh keeps the search

    polls.clear()
    page.evaluate("() => Object.defineProperty(document, 'hidden', {configurable: true, get: () => true})")
    page.clock.run_for(12_000)
    page.wait_for_timeout(300)
    assert polls == [], "no refresh while the tab is hidden"
