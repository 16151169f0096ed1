"""A small synchronous client for the cronsvc REST API (/api/v1/)."""

import http.client
import socket
import ssl
import time
from datetime import timedelta
from urllib.parse import parse_qsl, urlsplit

import requests

from . import __version__
from .config import check_url, resolve
from .errors import NetworkError, NotTheApi, error_envelope, error_from_response
from .models import CrontabImport, Execution, Job, JobVersion, Monitor, NextRuns, Ping, Project

MAX_PAGE_SIZE = 200  # the API's cap on ?page_size=


def _query(params):
    """Query parameters without the ones left unset; booleans as the API spells them."""
    return {key: ("true" if value else "false") if isinstance(value, bool) else value
            for key, value in (params or {}).items() if value is not None}


def _causes(exc):
    """``exc`` and the exceptions behind it (requests wraps urllib3's, which wrap the socket's)."""
    seen, pending = set(), [exc]
    while pending:
        current = pending.pop(0)
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        reason = getattr(current, "reason", None)
        pending += [reason if isinstance(reason, BaseException) else None, current.__cause__, current.__context__,
                    *(arg for arg in current.args if isinstance(arg, BaseException))]


def _found(exc, kind):
    return next((cause for cause in _causes(exc) if isinstance(cause, kind)), None)


def _not_reached(url, exc, timeout):
    """The one sentence that says why a request to ``url`` got no answer."""
    if isinstance(exc, requests.exceptions.ReadTimeout):
        return NetworkError(f"{url} accepted the connection but did not answer within {timeout:g} s.")
    if isinstance(exc, requests.exceptions.ConnectTimeout):
        return NetworkError(f"Could not reach {url}: no connection within {timeout:g} s.")
    tls = _found(exc, ssl.SSLError)
    if tls is not None:
        reason = getattr(tls, "verify_message", None) or getattr(tls, "reason", None) or tls.__class__.__name__
        return NetworkError(f"Could not reach {url}: the TLS handshake failed ({reason}).")
    if _found(exc, http.client.HTTPException) is not None:
        return NotTheApi(url, "it did not answer in HTTP")
    if _found(exc, ConnectionRefusedError) is not None:
        return NetworkError(f"Could not reach {url}: the connection was refused (is the server running?).")
    if _found(exc, socket.gaierror) is not None:
        return NetworkError(f"Could not reach {url}: its host name does not resolve.")
    if _found(exc, ConnectionResetError) is not None:
        return NetworkError(f"Could not reach {url}: the connection was closed without an answer.")
    return NetworkError(f"Could not reach {url}: {exc.__class__.__name__}.")


def _content_type(response):
    return (response.headers.get("Content-Type") or "").split(";")[0].strip().lower()


def _json_kind(value):
    return {dict: "object", list: "list", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number")


def _shape_problem(body, expect):
    """What keeps ``body`` from being the object the API sends (``expect``: key -> type, or
    None for any type), else None."""
    if not isinstance(body, dict):
        return f"a JSON {_json_kind(body)}, not an object"
    missing = [key for key in expect if key not in body]
    if missing:
        return f"a JSON object without {', '.join(map(repr, missing))}"
    wrong = [key for key, kind in expect.items() if kind is not None and not isinstance(body[key], kind)]
    if wrong:
        return f"a JSON object whose {wrong[0]!r} is a {_json_kind(body[wrong[0]])}"
    return None


class Client:
    def __init__(self, url, api_key, *, timeout=30.0, session=None):
        self.url = check_url(url).rstrip("/")
        self.timeout = timeout
        self.session = session or requests.Session()
        self.session.headers.update({"Authorization": f"Bearer {api_key}", "Accept": "application/json",
                                     "User-Agent": f"cronsvc-client/{__version__}"})

    @classmethod
    def from_environment(cls, url=None, api_key=None, *, profile=None, **kwargs):
        """Settings from the arguments, CRONSVC_URL / CRONSVC_API_KEY, or the config file's
        profile (``profile``, else CRONSVC_PROFILE, else the default one)."""
        settings = resolve(url, api_key, profile=profile)
        return cls(settings.url, settings.api_key, **kwargs)

    # -- transport --------------------------------------------------------------------

    def request(self, method, path, *, params=None, json=None, headers=None, expect=None):
        """The decoded JSON answer (None for 204); ApiError for an error answer; NetworkError
        when nothing answers, NotTheApi for an answer the API would not send (``expect``: the
        keys the answer's object must have, each with its type or None)."""
        path = f"/api/v1/{path.lstrip('/')}"
        try:
            response = self.session.request(method, self.url + path, params=_query(params), json=json,
                                            headers=headers, timeout=self.timeout)
        except requests.RequestException as exc:
            raise _not_reached(self.url, exc, self.timeout) from None
        return self._answer(response, f"{method} {path}", expect)

    def _answer(self, response, what, expect):
        """The one place that tells the API's answers from anything else answering at the URL."""
        status, kind = response.status_code, _content_type(response) or "no content type"
        if status >= 400:
            if status < 500 and error_envelope(response) is None:
                raise NotTheApi(self.url, f"{what} answered HTTP {status} ({kind}) without the API's error object")
            raise error_from_response(response)
        if status == 204 or not response.content:
            if expect:
                raise NotTheApi(self.url, f"{what} answered HTTP {status} with nothing")
            return None
        if kind != "application/json" and not kind.endswith("+json"):
            raise NotTheApi(self.url, f"{what} answered HTTP {status} with {kind}, not JSON")
        try:
            body = response.json()
        except ValueError:
            raise NotTheApi(self.url, f"{what} answered HTTP {status} with text that is not valid JSON") from None
        self._check_shape(what, body, expect or {})
        return body

    def _check_shape(self, what, body, expect):
        problem = _shape_problem(body, expect)
        if problem:
            raise NotTheApi(self.url, f"{what} answered {problem}")

    def _one(self, model, method, path, **kwargs):
        """One object of the API as a ``model``."""
        body = self.request(method, path, expect=model.expected_keys(), **kwargs)
        return self._model(model, f"{method} /api/v1/{path.lstrip('/')}", body)

    def _model(self, model, what, data):
        """``model.from_api(data)``; NotTheApi when a field is not what the API sends (a date that is not one)."""
        try:
            return model.from_api(data)
        except (TypeError, ValueError, AttributeError) as exc:
            raise NotTheApi(self.url, f"{what} answered a {model.__name__.lower()} the client cannot read "
                                      f"({exc.__class__.__name__}: {exc})") from None

    def paginate(self, path, params=None, *, limit=None, page_size=None, item_keys=None):
        """Every item of a list, page after page, for both page-number and cursor lists: the
        query of the answer's ``next`` link is sent to the same path (so a proxy that rewrites
        the host or scheme does not matter). ``limit`` stops early; ``page_size`` (at most
        MAX_PAGE_SIZE) sets how many items each request asks for, by default the limit's
        worth or the API's default. ``item_keys``: the keys each item must have."""
        params = _query(params)
        page_size = page_size or (min(limit, MAX_PAGE_SIZE) if limit else None)
        if page_size:
            params["page_size"] = page_size
        count = 0
        while True:
            page = self.request("GET", path, params=params, expect={"results": list})
            for item in page["results"]:
                self._check_shape(f"GET /api/v1/{path.lstrip('/')}", item, item_keys or {})
                yield item
                count += 1
                if limit and count >= limit:
                    return
            if not page.get("next"):
                return
            # The next link carries the filters, the page size and the page or cursor.
            params = dict(parse_qsl(urlsplit(page["next"]).query, keep_blank_values=True))

    def _list(self, model, path, filters=None, *, limit=None, page_size=None):
        """The items of a list as ``model`` objects, fetched as the caller iterates."""
        what = f"GET /api/v1/{path.lstrip('/')}"
        return (self._model(model, what, item) for item in self.paginate(path, filters, limit=limit,
                                                                        page_size=page_size,
                                                                        item_keys=model.expected_keys()))

    # -- projects ---------------------------------------------------------------------

    def list_projects(self, *, limit=None, page_size=None, **filters):
        return self._list(Project, "projects/", filters, limit=limit, page_size=page_size)

    def get_project(self, project_id):
        return self._one(Project, "GET", f"projects/{project_id}/")

    # -- jobs -------------------------------------------------------------------------

    def list_jobs(self, *, limit=None, page_size=None, **filters):
        """Filters as the API names them: project, enabled, tag, search, health, ordering, ..."""
        return self._list(Job, "jobs/", filters, limit=limit, page_size=page_size)

    def get_job(self, job_id):
        return self._one(Job, "GET", f"jobs/{job_id}/")

    def create_job(self, body, *, idempotency_key=None):
        """``body`` as POST /api/v1/jobs/ takes it; ``project`` may be left out when the key
        reaches one project."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return self._one(Job, "POST", "jobs/", json=body, headers=headers)

    def update_job(self, job_id, changes):
        """A partial update (PATCH): fields left out keep their values."""
        return self._one(Job, "PATCH", f"jobs/{job_id}/", json=changes)

    def pause_job(self, job_id):
        return self._one(Job, "POST", f"jobs/{job_id}/pause/")

    def resume_job(self, job_id):
        return self._one(Job, "POST", f"jobs/{job_id}/resume/")

    def trigger_job(self, job_id):
        """Run the job now; the queued execution."""
        return self._one(Execution, "POST", f"jobs/{job_id}/trigger/")

    def delete_job(self, job_id, *, force=False):
        self.request("DELETE", f"jobs/{job_id}/", params={"force": True} if force else None)

    def next_runs(self, job_id, *, count=None, after=None):
        return self._one(NextRuns, "GET", f"jobs/{job_id}/next-runs/", params={"count": count, "after": after})

    def list_job_versions(self, job_id, *, limit=None, page_size=None):
        """The job's versions, newest first."""
        return self._list(JobVersion, f"jobs/{job_id}/versions/", limit=limit, page_size=page_size)

    def get_job_version(self, job_id, number):
        """One version, with its ``snapshot`` (the job's definition then, secrets masked)."""
        return self._one(JobVersion, "GET", f"jobs/{job_id}/versions/{int(number)}/")

    def rollback_job(self, job_id, number):
        """Make version ``number``'s definition the job's again: the new version (or the
        current one when the job already has that definition)."""
        return self._one(JobVersion, "POST", f"jobs/{job_id}/versions/{int(number)}/rollback/")

    def import_crontab(self, crontab, *, project=None, dry_run=True):
        body = {"crontab": crontab, "dry_run": dry_run}
        if project:
            body["project"] = project
        return self._one(CrontabImport, "POST", "jobs/import-crontab/", json=body)

    # -- executions -------------------------------------------------------------------

    def list_executions(self, *, limit=None, page_size=None, **filters):
        """Newest first. Filters: job, project, status, trigger, scheduled_for_after,
        scheduled_for_before (ISO 8601), q (words of the error or the response body, see
        docs/search.md), status_code (503 or a class: 5xx)."""
        return self._list(Execution, "executions/", filters, limit=limit, page_size=page_size)

    def get_execution(self, execution_id):
        """One execution with its attempts."""
        return self._one(Execution, "GET", f"executions/{execution_id}/")

    def cancel_execution(self, execution_id):
        """Cancel a queued or running run; a cancelled one is returned as it is. ApiError
        ``execution_finished`` (409) for a run that already finished otherwise."""
        return self._one(Execution, "POST", f"executions/{execution_id}/cancel/")

    def follow_executions(self, *, job=None, project=None, backlog=10, interval=2.0,
                          lookback=timedelta(minutes=10), sleep=time.sleep):
        """Yield the last ``backlog`` runs, then every new run and every change of a run's
        status, oldest first, polling every ``interval`` seconds until the caller stops.
        See Follower for how runs are found."""
        follower = Follower(self, {"job": job, "project": project}, lookback)
        yield from follower.start(backlog)
        while True:
            sleep(interval)
            yield from follower.poll()

    # -- monitors ---------------------------------------------------------------------

    def list_monitors(self, *, limit=None, page_size=None, **filters):
        return self._list(Monitor, "monitors/", filters, limit=limit, page_size=page_size)

    def get_monitor(self, monitor_id):
        return self._one(Monitor, "GET", f"monitors/{monitor_id}/")

    def create_monitor(self, body):
        return self._one(Monitor, "POST", "monitors/", json=body)

    def update_monitor(self, monitor_id, changes):
        return self._one(Monitor, "PATCH", f"monitors/{monitor_id}/", json=changes)

    def pause_monitor(self, monitor_id):
        return self._one(Monitor, "POST", f"monitors/{monitor_id}/pause/")

    def resume_monitor(self, monitor_id):
        return self._one(Monitor, "POST", f"monitors/{monitor_id}/resume/")

    def delete_monitor(self, monitor_id):
        self.request("DELETE", f"monitors/{monitor_id}/")

    def list_pings(self, monitor_id, *, limit=None, page_size=None):
        return self._list(Ping, f"monitors/{monitor_id}/pings/", limit=limit, page_size=page_size)


class Follower:
    """Finds new runs and status changes by reading the history's cursor pages.

    The history is ordered by scheduled time, newest first, and a run may be written after
    runs scheduled later (a late scheduler, a retry), so each poll reads every page from the
    newest run back to a horizon: ``lookback`` before the newest run seen, or the oldest run
    still unfinished if that is earlier (for at most an hour, so a run stuck in the queue
    does not widen every poll). Times are the server's, so the client's clock does not matter.
    """

    PENDING_FOR_AT_MOST = timedelta(hours=1)

    def __init__(self, client, filters, lookback):
        self.client, self.filters, self.lookback = client, filters, lookback
        self.shown = {}  # id -> (status, scheduled_for) of runs at or after the horizon
        self.newest = None

    def start(self, backlog):
        recent = list(self.client.list_executions(limit=max(backlog, 1), **self.filters))
        self._remember(recent)
        return list(reversed(recent[:backlog]))

    def poll(self):
        horizon = self._horizon()
        runs = list(self.client.list_executions(
            scheduled_for_after=horizon.isoformat() if horizon else None,
            limit=None if horizon else MAX_PAGE_SIZE, page_size=MAX_PAGE_SIZE, **self.filters))
        changed = [run for run in runs if self.shown.get(run.id, (None,))[0] != run.status]
        self._remember(runs)
        self._forget_before(horizon)
        return sorted(changed, key=lambda run: (run.scheduled_for, run.created_at or run.scheduled_for))

    def _remember(self, runs):
        for run in runs:
            self.shown[run.id] = (run.status, run.scheduled_for, run.finished)
            if self.newest is None or run.scheduled_for > self.newest:
                self.newest = run.scheduled_for

    def _horizon(self):
        if self.newest is None:
            return None
        horizon = self.newest - self.lookback
        pending = [at for _, at, finished in self.shown.values()
                   if not finished and at >= self.newest - self.PENDING_FOR_AT_MOST]
        return min([horizon, *pending])

    def _forget_before(self, horizon):
        if horizon is not None:
            self.shown = {key: value for key, value in self.shown.items() if value[1] >= horizon}
