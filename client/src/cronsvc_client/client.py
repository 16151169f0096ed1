"""A small synchronous client for the cronsvc REST API (/api/v1/)."""

import time
from datetime import timedelta
from urllib.parse import parse_qsl, urlsplit

import requests

from . import __version__
from .config import resolve
from .errors import NetworkError, error_from_response
from .models import CrontabImport, Execution, Job, JobVersion, Monitor, NextRuns, Ping, Project

MAX_PAGE_SIZE = 200  # the API's cap on ?page_size=


def _query(params):
    """Query parameters without the ones left unset; booleans as the API spells them."""
    return {key: ("true" if value else "false") if isinstance(value, bool) else value
            for key, value in (params or {}).items() if value is not None}


class Client:
    def __init__(self, url, api_key, *, timeout=30.0, session=None):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = session or requests.Session()
        self.session.headers.update({"Authorization": f"Bearer {api_key}", "Accept": "application/json",
                                     "User-Agent": f"cronsvc-client/{__version__}"})

    @classmethod
    def from_environment(cls, url=None, api_key=None, **kwargs):
        """Settings from the arguments, CRONSVC_URL / CRONSVC_API_KEY or the config file."""
        settings = resolve(url, api_key)
        return cls(settings.url, settings.api_key, **kwargs)

    # -- transport --------------------------------------------------------------------

    def request(self, method, path, *, params=None, json=None, headers=None):
        """The decoded JSON answer (None for 204); ApiError for an error answer."""
        url = f"{self.url}/api/v1/{path.lstrip('/')}"
        try:
            response = self.session.request(method, url, params=_query(params), json=json, headers=headers,
                                            timeout=self.timeout)
        except requests.RequestException as exc:
            raise NetworkError(f"Could not reach {self.url}: {exc}") from None
        if response.status_code >= 400:
            raise error_from_response(response)
        if response.status_code == 204 or not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise NetworkError(f"{url} answered {response.status_code} with something that is not JSON; "
                               "is CRONSVC_URL the cronsvc server?") from None

    def paginate(self, path, params=None, *, limit=None, page_size=None):
        """Every item of a list, page after page, for both page-number and cursor lists: the
        query of the answer's ``next`` link is sent to the same path (so a proxy that rewrites
        the host or scheme does not matter). ``limit`` stops early; ``page_size`` (at most
        MAX_PAGE_SIZE) sets how many items each request asks for, by default the limit's
        worth or the API's default."""
        params = _query(params)
        page_size = page_size or (min(limit, MAX_PAGE_SIZE) if limit else None)
        if page_size:
            params["page_size"] = page_size
        count = 0
        while True:
            page = self.request("GET", path, params=params)
            for item in page["results"]:
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
        return (model.from_api(item) for item in self.paginate(path, filters, limit=limit, page_size=page_size))

    # -- projects ---------------------------------------------------------------------

    def list_projects(self, *, limit=None, page_size=None, **filters):
        return self._list(Project, "projects/", filters, limit=limit, page_size=page_size)

    def get_project(self, project_id):
        return Project.from_api(self.request("GET", f"projects/{project_id}/"))

    # -- jobs -------------------------------------------------------------------------

    def list_jobs(self, *, limit=None, page_size=None, **filters):
        """Filters as the API names them: project, enabled, tag, search, health, ordering, ..."""
        return self._list(Job, "jobs/", filters, limit=limit, page_size=page_size)

    def get_job(self, job_id):
        return Job.from_api(self.request("GET", f"jobs/{job_id}/"))

    def create_job(self, body, *, idempotency_key=None):
        """``body`` as POST /api/v1/jobs/ takes it; ``project`` may be left out when the key
        reaches one project."""
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        return Job.from_api(self.request("POST", "jobs/", json=body, headers=headers))

    def update_job(self, job_id, changes):
        """A partial update (PATCH): fields left out keep their values."""
        return Job.from_api(self.request("PATCH", f"jobs/{job_id}/", json=changes))

    def pause_job(self, job_id):
        return Job.from_api(self.request("POST", f"jobs/{job_id}/pause/"))

    def resume_job(self, job_id):
        return Job.from_api(self.request("POST", f"jobs/{job_id}/resume/"))

    def trigger_job(self, job_id):
        """Run the job now; the queued execution."""
        return Execution.from_api(self.request("POST", f"jobs/{job_id}/trigger/"))

    def delete_job(self, job_id, *, force=False):
        self.request("DELETE", f"jobs/{job_id}/", params={"force": True} if force else None)

    def next_runs(self, job_id, *, count=None, after=None):
        return NextRuns.from_api(self.request("GET", f"jobs/{job_id}/next-runs/",
                                              params={"count": count, "after": after}))

    def list_job_versions(self, job_id, *, limit=None, page_size=None):
        """The job's versions, newest first."""
        return self._list(JobVersion, f"jobs/{job_id}/versions/", limit=limit, page_size=page_size)

    def get_job_version(self, job_id, number):
        """One version, with its ``snapshot`` (the job's definition then, secrets masked)."""
        return JobVersion.from_api(self.request("GET", f"jobs/{job_id}/versions/{int(number)}/"))

    def rollback_job(self, job_id, number):
        """Make version ``number``'s definition the job's again: the new version (or the
        current one when the job already has that definition)."""
        return JobVersion.from_api(self.request("POST", f"jobs/{job_id}/versions/{int(number)}/rollback/"))

    def import_crontab(self, crontab, *, project=None, dry_run=True):
        body = {"crontab": crontab, "dry_run": dry_run}
        if project:
            body["project"] = project
        return CrontabImport.from_api(self.request("POST", "jobs/import-crontab/", json=body))

    # -- executions -------------------------------------------------------------------

    def list_executions(self, *, limit=None, page_size=None, **filters):
        """Newest first. Filters: job, project, status, trigger, scheduled_for_after,
        scheduled_for_before (ISO 8601), q (words of the error or the response body, see
        docs/search.md), status_code (503 or a class: 5xx)."""
        return self._list(Execution, "executions/", filters, limit=limit, page_size=page_size)

    def get_execution(self, execution_id):
        """One execution with its attempts."""
        return Execution.from_api(self.request("GET", f"executions/{execution_id}/"))

    def cancel_execution(self, execution_id):
        """Cancel a queued or running run; a cancelled one is returned as it is. ApiError
        ``execution_finished`` (409) for a run that already finished otherwise."""
        return Execution.from_api(self.request("POST", f"executions/{execution_id}/cancel/"))

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
        return Monitor.from_api(self.request("GET", f"monitors/{monitor_id}/"))

    def create_monitor(self, body):
        return Monitor.from_api(self.request("POST", "monitors/", json=body))

    def update_monitor(self, monitor_id, changes):
        return Monitor.from_api(self.request("PATCH", f"monitors/{monitor_id}/", json=changes))

    def pause_monitor(self, monitor_id):
        return Monitor.from_api(self.request("POST", f"monitors/{monitor_id}/pause/"))

    def resume_monitor(self, monitor_id):
        return Monitor.from_api(self.request("POST", f"monitors/{monitor_id}/resume/"))

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
