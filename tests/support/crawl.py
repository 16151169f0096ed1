"""Walk a running site as a signed-in person does: follow every link of every page on the
same host, load the page assets, and note each answer's status."""

from collections import deque
from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import requests


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.pages, self.assets, self.csrf = [], [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("hx-get"):  # fragments htmx loads into a page are pages too
            self.pages.append(attrs["hx-get"])
        if tag == "a" and attrs.get("href"):
            self.pages.append(attrs["href"])
        elif tag in ("script", "img") and attrs.get("src"):
            self.assets.append(attrs["src"])
        elif tag == "link" and attrs.get("href") and attrs.get("rel") in ("stylesheet", "icon"):
            self.assets.append(attrs["href"])
        elif tag == "input" and attrs.get("name") == "csrfmiddlewaretoken":
            self.csrf = attrs.get("value")


def parse(html):
    links = _Links()
    links.feed(html)
    return links


@dataclass
class Visit:
    statuses: dict = field(default_factory=dict)  # url -> status

    def failures(self):
        return {url: status for url, status in self.statuses.items() if status >= 500}


class Browser:
    """A requests session that behaves like a browser, by default behind the operator's TLS
    proxy: each request says it came over https (X-Forwarded-Proto), forms send their Origin,
    and the secure cookies the site sets are sent back although the test talks plain http."""

    def __init__(self, base_url, behind_tls_proxy=True):
        self.base_url = base_url.rstrip("/")
        scheme = "https" if behind_tls_proxy else "http"
        self.origin = f"{scheme}://{urlsplit(self.base_url).netloc}"
        self.session = requests.Session()
        self.session.headers["X-Forwarded-Proto"] = scheme

    def get(self, path, **kwargs):
        response = self.session.get(urljoin(self.base_url + "/", path), allow_redirects=False, timeout=30, **kwargs)
        self._keep_cookies()
        return response

    def post_form(self, path, data, page=None):
        """POST a form the way a browser does: the CSRF token from its page, its Origin."""
        page = page if page is not None else self.get(path).text
        data = {"csrfmiddlewaretoken": parse(page).csrf, **data}
        response = self.session.post(urljoin(self.base_url + "/", path), data=data, allow_redirects=False,
                                     timeout=30, headers={"Origin": self.origin, "Referer": self.origin + path})
        self._keep_cookies()
        return response

    def _keep_cookies(self):
        for cookie in self.session.cookies:
            cookie.secure = False

    def crawl(self, start, within="/", skip=(), limit=400, keep_query=True):
        """Breadth-first over same-host links under ``within``, skipping paths that start
        with any of ``skip`` (and query strings unless ``keep_query``: the admin's sort and
        filter links). Returns a Visit with every page's and asset's status."""
        self.keep_query = keep_query
        visit = Visit()
        queue, seen = deque([start]), {start}
        while queue and len(visit.statuses) < limit:
            path = queue.popleft()
            response = self.get(path)
            visit.statuses[path] = response.status_code
            if response.is_redirect:
                self._enqueue(urljoin(path, response.headers["Location"]), within, skip, seen, queue)
                continue
            if "text/html" not in response.headers.get("Content-Type", ""):
                continue
            links = parse(response.text)
            for asset in links.assets:
                asset_path = self._local(urljoin(path, asset))
                if asset_path and asset_path not in visit.statuses:
                    visit.statuses[asset_path] = self.get(asset_path).status_code
            for href in links.pages:
                self._enqueue(urljoin(path, href), within, skip, seen, queue)
        return visit

    def _local(self, url):
        parts = urlsplit(url)
        if parts.netloc and parts.netloc != urlsplit(self.base_url).netloc:
            return None
        if parts.scheme and parts.scheme not in ("http", "https"):
            return None
        keep = parts.query and getattr(self, "keep_query", True)
        return parts.path + (f"?{parts.query}" if keep else "")

    def _enqueue(self, url, within, skip, seen, queue):
        path = self._local(url)
        if path and path.startswith(within) and not path.startswith(tuple(skip)) and path not in seen:
            seen.add(path)
            queue.append(path)
