"""The evidence an alert carries: job, schedule in words, the run's times, status, error,
response excerpt, attempts, and an absolute link to the run's page."""

from __future__ import annotations

from functools import lru_cache

from django.conf import settings
from django.urls import reverse

from cronsvc.notify.formats import alert_message, excerpt


_PLACEHOLDER = "00000000-0000-0000-0000-000000000000"


@lru_cache(maxsize=8)
def _pattern(name):
    # reverse() once per page kind, then string formatting: alerts come by the hundred.
    return reverse(name, args=[_PLACEHOLDER])


def execution_url(execution_id):
    return settings.SITE_URL + _pattern("web:execution_detail").replace(_PLACEHOLDER, str(execution_id))


def job_url(job_id):
    return settings.SITE_URL + _pattern("web:job_detail").replace(_PLACEHOLDER, str(job_id))


def schedule_text(job):
    from apps.jobs.scheduling import job_schedule
    from cronsvc.schedules import describe

    try:
        return describe(job_schedule(job))
    except Exception:  # a schedule the engine no longer reads must not stop the alert
        return job.cron_expression or job.schedule_type


def _iso(value):
    return value.isoformat() if value else None


def evidence_for(job, execution=None, *, detail=""):
    data = {
        "job": {"id": str(job.id), "name": job.name, "schedule": schedule_text(job), "url": job_url(job.id)},
        "project": {"id": str(job.project_id), "name": job.project.name},
    }
    if detail:
        data["detail"] = detail
    if execution is not None:
        data["execution"] = {
            "id": str(execution.id),
            "scheduled_for": _iso(execution.scheduled_for),
            "started_at": _iso(execution.started_at),
            "finished_at": _iso(execution.finished_at),
            "status": execution.status,
            "attempts": execution.attempt,
            "error_kind": execution.error_kind,
            "error_message": excerpt(execution.error_message, 1000),
            "response_status": execution.response_status,
            "response_excerpt": excerpt(execution.response_body),
            "url": execution_url(execution.id),
        }
    return data


def build_alert(event, job, execution=None, *, detail=""):
    """(subject, text, evidence) of an alert about ``job``."""
    data = evidence_for(job, execution, detail=detail)
    subject, text = alert_message(event, data)
    return subject, text, data
