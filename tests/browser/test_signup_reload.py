"""Sign-up is a Post/Redirect/Get: the browser lands on /welcome/, and reloading it re-posts
nothing (no second organization, no "resubmit the form?") and no longer shows the key."""

import uuid

import pytest

from apps.accounts.models import Organization
from tests.conftest import ensure_seeded_plans

from .harness import start_web
from .test_journey import TIMEOUT_MS, sign_up

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True),
              pytest.mark.xdist_group("browser")]


def test_reloading_the_welcome_page_re_posts_nothing(tmp_path, static_root, browser):
    ensure_seeded_plans()
    web = start_web(tmp_path, static_root)
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        sign_up(page, web, "Reload Works", f"reload-{uuid.uuid4().hex[:8]}@example.com")
        assert page.url == web.url("/welcome/")
        assert "Run now" in page.locator("#first-run-promise").inner_text()

        answer = page.reload()
        assert answer.request.method == "GET" and answer.status == 200
        page.locator("#first-key-gone").wait_for()
        assert page.locator("#first-key").count() == 0
        assert Organization.objects.filter(name="Reload Works").count() == 1
    finally:
        page.close()
        web.stop()
