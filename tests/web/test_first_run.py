"""A stranger signs up and does what the sign-up page promises: creates the job the new-job
form suggests, sees it accepted by the free plan, and starts its first run at once with
"Run now"; the schedule's next run is within the plan's interval (computed, not waited for)."""

import re
from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.test import Client
from django.utils import timezone

from apps.executions.models import Execution
from apps.jobs.models import Job
from apps.plans.models import Plan
from apps.projects.models import Project
from cronsvc.schedules.describe import format_duration
from tests.conftest import ensure_seeded_plans
from tests.web.conftest import job_form

pytestmark = pytest.mark.django_db


def test_a_stranger_gets_the_first_run_the_sign_up_page_promises():
    ensure_seeded_plans()
    free = Plan.objects.get(code="free")
    stranger = Client()
    promise = _text(stranger.get("/signup/"), "first-run-promise")
    assert "Run now" in promise and f"at most once every {format_duration(free.min_interval_seconds)}" in promise
    assert "two minutes" not in promise

    signed_up = stranger.post("/signup/", {"organization": "Stranger Co", "email": "stranger@example.com",
                                           "password1": "a-long-enough-pass", "password2": "a-long-enough-pass"})
    assert signed_up.status_code == 302
    assert "Run now" in _text(stranger.get(signed_up["Location"]), "first-run-promise")

    new_job = stranger.get("/jobs/new/").content.decode()
    suggested = re.search(r'name="cron_expression"[^>]*value="([^"]+)"', new_job).group(1)
    project = Project.objects.get(organization__name="Stranger Co")
    before = timezone.now()
    created = stranger.post("/jobs/new/", job_form(SimpleNamespace(project=project), name="first job",
                                                   cron_expression=suggested, timezone="UTC", auth_type="none",
                                                   auth_token=""))
    assert created.status_code == 302, created.content.decode()[:3000]
    job = Job.objects.get(name="first job")
    assert job.enabled and before < job.next_run_at <= before + timedelta(seconds=free.min_interval_seconds)

    assert stranger.post(f"/jobs/{job.pk}/trigger/").status_code == 302  # "Run now"
    (run,) = Execution.objects.filter(job=job)
    assert run.status == Execution.Status.QUEUED and run.scheduled_for <= timezone.now()


def test_the_free_plan_refuses_every_minute_and_the_page_promises_no_such_thing():
    """The promise the issue found broken: "a run in two minutes" by a `* * * * *` schedule."""
    ensure_seeded_plans()
    stranger = Client()
    stranger.post("/signup/", {"organization": "Minute Co", "email": "minute@example.com",
                               "password1": "a-long-enough-pass", "password2": "a-long-enough-pass"})
    project = Project.objects.get(organization__name="Minute Co")
    refused = stranger.post("/jobs/new/", job_form(SimpleNamespace(project=project), cron_expression="* * * * *",
                                                   auth_type="none", auth_token=""))
    assert refused.status_code == 400 and "once every 1 hour" in refused.content.decode()
    assert "minute" not in _text(stranger.get("/welcome/"), "first-run-promise")


def _text(response, element_id):
    assert response.status_code == 200
    found = re.search(rf'id="{element_id}"[^>]*>(.*?)</p>', response.content.decode(), re.S)
    return re.sub(r"<[^>]+>", "", found.group(1))
