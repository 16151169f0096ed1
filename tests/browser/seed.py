"""Believable history for the README's screenshots: a few projects, jobs in every state,
and a week of executions with attempts. Written straight to the database."""

import random
from datetime import timedelta

from django.utils import timezone

from apps.executions.models import Attempt, Execution
from apps.jobs.models import Job
from apps.jobs.services import reschedule
from apps.projects.models import Project

S = Execution.Status


def seed_history(organization, *, url, now=None, rng=None):
    now = now or timezone.now()
    rng = rng or random.Random(7)
    billing = Project.objects.create(organization=organization, name="Billing", slug="billing",
                                     timezone="Europe/Berlin")
    reports = Project.objects.create(organization=organization, name="Reports", slug="reports",
                                     timezone="America/New_York")
    specs = [
        (billing, "Charge renewals", "0 * * * *", "Europe/Berlin", ["payments"], 0.99, 180),
        (billing, "Send invoices", "30 6 * * 1-5", "Europe/Berlin", ["email", "nightly"], 1.0, 900),
        (billing, "Sync exchange rates", "*/15 * * * *", "Europe/Berlin", ["fx"], 0.7, 420),
        (reports, "Daily KPI report", "0 7 * * *", "America/New_York", ["nightly"], 1.0, 2400),
        (reports, "Warm caches", "*/10 * * * *", "America/New_York", ["cache"], 0.995, 95),
    ]
    jobs = []
    for project, name, expression, zone, tags, success, typical_ms in specs:
        job = Job(project=project, organization=organization, name=name, cron_expression=expression,
                  timezone=zone, tags=tags, url=url, method="POST", body='{"job": "{{ job.id }}"}',
                  body_format="json", created_at=now - timedelta(days=8))
        reschedule(job, now=now)
        job.save()
        _history(job, now, success, typical_ms, rng)
        jobs.append(job)
    paused = jobs[3]
    paused.enabled, paused.paused_reason = False, "paused by ops during the migration"
    paused.save(update_fields=["enabled", "paused_reason"])
    return jobs


def _history(job, now, success, typical_ms, rng):
    step = timedelta(minutes=15) if "*/" in job.cron_expression or job.cron_expression.startswith("0 *") else timedelta(hours=6)
    start = now - timedelta(days=7)
    at = start.replace(minute=start.minute - start.minute % 15, second=0, microsecond=0)
    executions, attempts = [], []
    failures_in_row = 0
    last = None
    while at < now - timedelta(minutes=1):
        last_one = at + step >= now - timedelta(minutes=1)
        ok = rng.random() < success and not (last_one and success < 0.8)  # the flaky job is failing now
        duration = max(20, int(rng.gauss(typical_ms, typical_ms * 0.25)))
        status = S.SUCCEEDED if ok else rng.choice([S.FAILED, S.DEAD, S.TIMED_OUT])
        late = rng.randint(5, 900)
        execution = Execution(job=job, organization_id=job.organization_id, scheduled_for=at, status=status,
                              attempt=1 if ok else 3, started_at=at + timedelta(milliseconds=late),
                              finished_at=at + timedelta(milliseconds=late + duration), duration_ms=duration,
                              response_status=200 if ok else 503, created_at=at, queue="runs.pro",
                              response_body='{"ok": true}' if ok else "upstream unavailable",
                              error_kind="" if ok else "http_5xx",
                              error_message="" if ok else "HTTP 503 from the endpoint")
        executions.append(execution)
        failures_in_row = 0 if ok else failures_in_row + 1
        last = execution
        at += step
    Execution.objects.bulk_create(executions, batch_size=1000)
    for execution in executions[-20:]:
        attempts.append(Attempt(
            execution=execution, number=1, started_at=execution.started_at, finished_at=execution.finished_at,
            duration_ms=execution.duration_ms, request_method=job.method, request_url=job.url,
            request_headers={"User-Agent": "cronsvc/0.1.0", "Authorization": "••••", "webhook-id": str(execution.id)},
            request_body=f'{{"job": "{job.id}"}}', response_status=execution.response_status,
            response_headers={"content-type": "application/json"}, response_body=execution.response_body,
            outcome="succeeded" if execution.status == S.SUCCEEDED else "failed", error_kind=execution.error_kind,
            error_message=execution.error_message))
    Attempt.objects.bulk_create(attempts)
    if last is not None:
        Job.objects.filter(pk=job.pk).update(last_run_at=last.started_at, last_status=last.status,
                                             consecutive_failures=failures_in_row)
