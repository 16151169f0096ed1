"""A plan change: downgrades pause (never delete) the jobs over the new limits and list
them; an upgrade resumes them; waiting runs move to the new plan's queue at once."""

from datetime import timedelta

from apps.accounts.services import change_plan
from apps.billing.plan_change import PAUSE_PREFIX, paused_by_plan
from apps.executions.models import Execution
from apps.jobs.models import Job
from apps.plans.models import Plan
from tests.conftest import utc

NOW = utc(2030, 1, 10, 12, 0)


def test_downgrade_pauses_jobs_over_the_new_limits_and_deletes_nothing(tenant, make_job):
    fits = make_job(tenant, cron_expression="0 * * * *")
    too_often = make_job(tenant, cron_expression="*/5 * * * *")
    too_slow = make_job(tenant, cron_expression="0 * * * *", timeout_seconds=60)
    too_many_retries = make_job(tenant, cron_expression="0 * * * *", max_attempts=5)
    change = change_plan(tenant.organization, Plan.objects.get(code="free"), now=NOW)

    assert {job.pk: limits for job, limits in change.paused} == {
        too_often.pk: ["min_interval_seconds"], too_slow.pk: ["max_timeout_seconds"],
        too_many_retries.pk: ["max_attempts"]}
    assert Job.objects.for_organization(tenant.organization).count() == 4
    assert Job.objects.get(pk=fits.pk).enabled
    paused = Job.objects.get(pk=too_slow.pk)
    assert not paused.enabled and paused.paused_reason.startswith(PAUSE_PREFIX)
    assert "max_timeout_seconds" in paused.paused_reason and "Free" in paused.paused_reason
    assert set(paused_by_plan(tenant.organization).values_list("pk", flat=True)) == {
        too_often.pk, too_slow.pk, too_many_retries.pk}


def test_downgrade_pauses_the_newest_jobs_past_max_jobs(tenant, make_job):
    jobs = [make_job(tenant, cron_expression="0 * * * *", created_at=NOW + timedelta(minutes=i)) for i in range(7)]
    change = change_plan(tenant.organization, Plan.objects.get(code="free"), now=NOW)  # max_jobs 5
    assert [job.pk for job, limits in change.paused] == [jobs[5].pk, jobs[6].pk]
    assert all(limits == ["max_jobs"] for _, limits in change.paused)
    assert Job.objects.for_organization(tenant.organization).filter(enabled=True).count() == 5


def test_upgrade_resumes_what_the_downgrade_paused_but_not_jobs_paused_by_hand(tenant, make_job):
    job = make_job(tenant, cron_expression="*/5 * * * *")
    by_hand = make_job(tenant, cron_expression="*/5 * * * *", enabled=False, paused_reason="holiday")
    change_plan(tenant.organization, Plan.objects.get(code="free"), now=NOW)
    assert not Job.objects.get(pk=job.pk).enabled
    change = change_plan(tenant.organization, Plan.objects.get(code="pro"), now=NOW)
    assert [j.pk for j in change.resumed] == [job.pk]
    resumed = Job.objects.get(pk=job.pk)
    assert resumed.enabled and resumed.paused_reason == "" and resumed.next_run_at > NOW
    assert not Job.objects.get(pk=by_hand.pk).enabled


def test_an_operators_edit_of_the_plan_lets_a_paused_job_fit_again(tenant, make_job):
    job = make_job(tenant, cron_expression="0 * * * *", timeout_seconds=45)
    free = Plan.objects.get(code="free")
    change_plan(tenant.organization, free, now=NOW)
    assert not Job.objects.get(pk=job.pk).enabled
    free.max_timeout_seconds = 45
    free.save()
    change_plan(tenant.organization, free, now=NOW)  # re-applied after the edit
    assert Job.objects.get(pk=job.pk).enabled


def test_waiting_runs_move_to_the_new_plans_queue_at_once(tenant, make_job, settings):
    settings.REGIONS = ["eu"]
    job, eu_job = make_job(tenant), make_job(tenant, region="eu")
    waiting = Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=NOW,
                                       queue="runs.pro", next_attempt_at=NOW + timedelta(minutes=5))
    waiting_eu = Execution.objects.create(job=eu_job, organization=tenant.organization, scheduled_for=NOW,
                                          queue="runs.pro.eu")
    published = Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=NOW - timedelta(hours=1),
                                         queue="runs.pro", published_at=NOW)
    change = change_plan(tenant.organization, Plan.objects.get(code="business"), now=NOW)
    assert change.requeued == 2
    assert Execution.objects.get(pk=waiting.pk).queue == "runs.business"
    assert Execution.objects.get(pk=waiting_eu.pk).queue == "runs.business.eu"
    assert Execution.objects.get(pk=published.pk).queue == "runs.pro"  # already in the old queue's hands


def test_a_job_paused_by_a_downgrade_does_not_resume_by_hand_until_it_fits(tenant, make_job, client):
    from rest_framework.test import APIClient

    job = make_job(tenant, cron_expression="*/5 * * * *")
    change_plan(tenant.organization, Plan.objects.get(code="free"), now=NOW)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {tenant.full_api_key}")
    refused = api.post(f"/api/v1/jobs/{job.pk}/resume/")
    assert refused.status_code == 402, refused.content
    assert refused.json()["error"]["code"] == "plan_limit"
    assert not Job.objects.get(pk=job.pk).enabled
    Job.objects.filter(pk=job.pk).update(cron_expression="0 * * * *")
    assert api.post(f"/api/v1/jobs/{job.pk}/resume/").status_code == 200
    assert Job.objects.get(pk=job.pk).enabled
