"""/api/docs/ renders Swagger UI with every outside host unreachable: its files come from
the pinned drf-spectacular-sidecar package through our own static files, not a CDN."""

from urllib.parse import urlsplit

import pytest

from .harness import start_web

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_api_docs_render_offline(tmp_path, static_root, browser):
    web = start_web(tmp_path, static_root)
    try:
        page = browser.new_page()
        outside, errors = [], []

        def only_local(route):
            if urlsplit(route.request.url).hostname in ("127.0.0.1", "localhost"):
                return route.continue_()
            outside.append(route.request.url)
            return route.abort()

        page.route("**/*", only_local)
        page.on("console", lambda message: message.type == "error" and errors.append(message.text))
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(web.url("/api/docs/"))
        page.wait_for_selector(".swagger-ui .info .title", timeout=30_000)
        assert "cronsvc API" in page.inner_text(".swagger-ui .info .title")
        page.wait_for_selector(".opblock-tag", timeout=30_000)  # the schema loaded: operations listed
        assert page.locator(".opblock").count() > 20
        assert outside == [] and errors == []
    finally:
        web.stop()


def test_api_docs_page_names_no_outside_host(client):
    html = client.get("/api/docs/", HTTP_HOST="127.0.0.1").content.decode()
    assert "swagger-ui" in html and "cdn" not in html.lower() and "https://" not in html
