import pytest
from django.db import connections

from tests.support.target import start_target

from .console import ConsoleGuard, GuardedBrowser
from .harness import collectstatic, launch_browser


@pytest.fixture(autouse=True)
def _sync_playwright_with_django(monkeypatch):
    """Playwright's sync API runs an event loop in the test thread; Django then refuses
    database calls there unless told it is fine (it is: nothing else uses that loop)."""
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@pytest.fixture(scope="session")
def static_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("static")
    collectstatic(root)
    return root


@pytest.fixture
def console():
    """The console errors of every page the test opened; any one fails the test."""
    return ConsoleGuard()


@pytest.fixture
def browser(_sync_playwright_with_django, console):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = launch_browser(playwright)
        try:
            yield GuardedBrowser(browser, console)
            console.check()
        finally:
            browser.close()
            # While Playwright's loop runs, Django keeps this thread's connections in
            # context variables: close them here, or they outlive the test and keep the
            # test database from being dropped.
            connections.close_all()


@pytest.fixture
def target():
    from apps.executions.shared_redis import redis_client
    from cronsvc.delivery.breaker import host_key

    server = start_target()
    client = redis_client()
    if client is not None:  # a port can come back in a later run: start with a closed circuit
        client.delete("cronsvc:cb:" + host_key(server.base_url))
    yield server
    server.close()
