"""Alerts decided in the recording transaction: runs go through the worker's code
(run_batch) against a real local endpoint, on PostgreSQL."""

import pytest
from django.utils import timezone

from apps.executions.hooks import RunOutcome
from apps.notifications.alerts import on_run_outcomes
from apps.notifications.models import AlertState, Notification, OutboxEvent
from apps.notifications.services import set_rule

from .conftest import queued, run


def alerts(job, event=None):
    rows = Notification.objects.filter(job=job).order_by("created_at")
    return list(rows.filter(event=event) if event else rows)


@pytest.fixture
def failing_job(tenant, make_job, target):
    return make_job(tenant, url=target.url("/status/500"), max_attempts=1)


def test_a_burst_of_failures_gives_one_alert_per_channel(tenant, make_channel, failing_job):
    slack = make_channel(tenant, "slack")
    email = make_channel(tenant, "email", to=["ops@example.com"])
    for _ in range(6):
        run(queued(failing_job))
    run(*[queued(failing_job, scheduled_for=timezone.now().replace(microsecond=i)) for i in range(5)])  # one group
    failing_job.refresh_from_db()
    assert failing_job.consecutive_failures == 11
    rows = alerts(failing_job)
    assert sorted(r.channel_id for r in rows) == sorted([slack.id, email.id])
    assert {r.event for r in rows} == {"failure"}


def test_the_alert_carries_the_evidence(tenant, make_channel, failing_job, settings):
    make_channel(tenant, "slack")
    (execution,) = run(queued(failing_job))
    (row,) = alerts(failing_job)
    run_data = row.data["execution"]
    assert row.execution_id == execution.id
    assert run_data["status"] == execution.status == "dead" and run_data["attempts"] == 1 and run_data["response_status"] == 500
    assert run_data["error_kind"] == execution.error_kind != ""
    assert run_data["response_excerpt"] == '{"ok": false}'
    assert run_data["url"] == f"{settings.SITE_URL}/executions/{execution.id}/"
    assert row.data["job"]["schedule"] and row.data["job"]["name"] == failing_job.name
    for piece in (failing_job.name, run_data["url"], "HTTP status: 500", execution.scheduled_for.isoformat()):
        assert piece in row.text


def test_threshold_of_consecutive_failures(tenant, make_channel, failing_job):
    make_channel(tenant)
    set_rule(tenant.project, None, {"failure_threshold": 3})
    run(queued(failing_job))
    run(queued(failing_job))
    assert alerts(failing_job) == []
    run(queued(failing_job))
    assert len(alerts(failing_job, "failure")) == 1


def test_recovery_only_after_a_notified_failure(tenant, make_channel, make_job, target):
    make_channel(tenant)
    job = make_job(tenant, url=target.url("/ok"), max_attempts=1)
    run(queued(job))
    assert alerts(job) == []  # nothing was failing
    job.url = target.url("/status/500")
    job.save()
    run(queued(job))
    job.url = target.url("/ok")
    job.save()
    run(queued(job))
    run(queued(job))
    assert [r.event for r in alerts(job)] == ["failure", "recovery"]
    assert not AlertState.objects.get(job=job).failure_notified


def test_recovery_can_be_muted_per_job(tenant, make_channel, make_job, target):
    make_channel(tenant)
    job = make_job(tenant, url=target.url("/status/500"), max_attempts=1)
    set_rule(tenant.project, job, {"notify_recovery": False})
    run(queued(job))
    job.url = target.url("/ok")
    job.save()
    run(queued(job))
    assert [r.event for r in alerts(job)] == ["failure"]


def test_auto_disable_is_notified_once(tenant, make_channel, failing_job):
    plan = tenant.organization.plan
    plan.auto_disable_after_failures = 3
    plan.save()
    make_channel(tenant)
    set_rule(tenant.project, None, {"failure_threshold": 10})
    for _ in range(3):
        run(queued(failing_job))
    failing_job.refresh_from_db()
    assert not failing_job.enabled
    (row,) = alerts(failing_job)
    assert row.event == "disabled" and row.data["execution"]["status"] == "dead"
    run(queued(failing_job))  # a manual trigger of the disabled job fails again: no second alert
    assert len(alerts(failing_job, "disabled")) == 1


def test_channels_hear_only_the_events_they_accept(tenant, make_channel, failing_job):
    quiet = make_channel(tenant)
    quiet.events = ["recovery"]
    quiet.save()
    run(queued(failing_job))
    assert alerts(failing_job) == []
    assert AlertState.objects.get(job=failing_job).failure_notified  # the state still moved


def test_nobody_listening_costs_one_query(tenant, make_job, django_assert_num_queries):
    job = make_job(tenant)
    outcomes = [RunOutcome(execution_id=None, job_id=job.id, organization_id=tenant.organization.id, status="failed",
                        finished_at=timezone.now()) for _ in range(200)]
    with django_assert_num_queries(1):
        on_run_outcomes(outcomes)
    assert not AlertState.objects.exists() and not Notification.objects.exists()


def test_skipped_runs_and_retries_are_not_outcomes_to_alert(tenant, make_channel, make_job, target):
    make_channel(tenant)
    job = make_job(tenant, url=target.url("/status/500"), max_attempts=3, retry_initial_delay_seconds=60)
    (execution,) = run(queued(job))
    assert execution.status == "queued"  # a retry waits
    assert alerts(job) == [] and not OutboxEvent.objects.exists()
