"""Every page a browser test opens must log no error: no Content-Security-Policy violation,
no uncaught exception, no failed script or stylesheet. A test that opens an error page on
purpose (a 404) says so with ``expect_status``."""

import re


class ConsoleGuard:
    def __init__(self):
        self.errors = []
        self._expected = []

    def watch(self, context):
        context.on("page", self._watch_page)
        for page in context.pages:
            self._watch_page(page)
        return context

    def expect(self, pattern):
        """A console error the test provokes on purpose (a regular expression on its text)."""
        self._expected.append(re.compile(pattern))

    def expect_status(self, status):
        """The browser logs the error page a test opens on purpose as a failed load."""
        self.expect(rf"Failed to load resource: the server responded with a status of {status}\b")

    def _watch_page(self, page):
        page.on("console", lambda message: self._console(page, message))
        page.on("pageerror", lambda error: self.errors.append(f"{page.url}: uncaught {error}"))

    def _console(self, page, message):
        if message.type != "error":
            return
        text = message.text
        if any(pattern.search(text) for pattern in self._expected):
            return
        self.errors.append(f"{page.url}: {text}")

    def check(self):
        assert not self.errors, "the browser logged errors:\n" + "\n".join(self.errors)


class GuardedBrowser:
    """The Playwright browser, whose every new context's pages are watched by ``guard``."""

    def __init__(self, browser, guard):
        self._browser, self.guard = browser, guard

    def new_context(self, **options):
        return self.guard.watch(self._browser.new_context(**options))

    def new_page(self, **options):
        page = self._browser.new_page(**options)
        self.guard._watch_page(page)
        return page

    def __getattr__(self, name):
        return getattr(self._browser, name)
