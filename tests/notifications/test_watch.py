"""The periodic watch: late runs, long-running runs, reminders, resends (time passed in)."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions.shared_redis import redis_client
from apps.notifications.models import AlertState, Notification
from apps.notifications.services import set_rule
from apps.notifications.watch import late_and_long, reminders, resend_due

from .conftest import queued, run


@pytest.fixture
def now():
    return timezone.now().replace(microsecond=0)


def test_a_run_started_late_is_notified_once(tenant, make_channel, make_job, now):
    make_channel(tenant)
    set_rule(tenant.project, None, {"late_after_seconds": 60}, now=now - timedelta(hours=1))
    job = make_job(tenant)
    on_time = queued(job, scheduled_for=now - timedelta(minutes=10), started_at=now - timedelta(minutes=10),
                     status="succeeded", trigger="schedule")
    late = queued(job, scheduled_for=now - timedelta(minutes=5), started_at=now - timedelta(minutes=3),
                  status="running", trigger="schedule")
    assert [r.execution_id for r in late_and_long(now)] == [late.id]
    assert late_and_long(now + timedelta(minutes=1)) == []  # once per episode
    row = Notification.objects.get(event="late")
    assert "Started 120 s after it was due" in row.text and row.data["execution"]["id"] == str(late.id)
    assert on_time.id != row.execution_id


def test_a_run_not_started_at_all_is_late_too(tenant, make_channel, make_job, now):
    make_channel(tenant)
    job = make_job(tenant)
    set_rule(tenant.project, job, {"late_after_seconds": 30}, now=now - timedelta(hours=1))
    stuck = queued(job, scheduled_for=now - timedelta(minutes=2), trigger="schedule")
    (row,) = late_and_long(now)
    assert row.execution_id == stuck.id and "Not started" in row.text


def test_a_long_running_run_is_notified_once(tenant, make_channel, make_job, now):
    make_channel(tenant)
    job = make_job(tenant)
    set_rule(tenant.project, job, {"long_running_seconds": 300})
    queued(job, status="running", scheduled_for=now - timedelta(minutes=2), started_at=now - timedelta(minutes=2))
    long = queued(job, status="running", scheduled_for=now - timedelta(minutes=9), started_at=now - timedelta(minutes=9))
    (row,) = late_and_long(now)
    assert row.event == "long_running" and row.execution_id == long.id and "Running for 540 s" in row.text
    assert late_and_long(now + timedelta(minutes=1)) == []  # once per run
    (later,) = late_and_long(now + timedelta(minutes=4))  # the other one has now run too long as well
    assert later.execution_id != long.id


def test_no_rule_no_scan(tenant, make_channel, make_job, now):
    make_channel(tenant)
    job = make_job(tenant)
    queued(job, status="running", scheduled_for=now - timedelta(hours=2), started_at=now - timedelta(hours=2))
    assert late_and_long(now) == []


def test_reminders_every_h_hours_while_failing(tenant, make_channel, make_job, target, now):
    make_channel(tenant)
    set_rule(tenant.project, None, {"reminder_hours": 2})
    job = make_job(tenant, url=target.url("/status/500"), max_attempts=1)
    run(queued(job))
    state = AlertState.objects.get(job=job)
    state.notified_at = state.last_reminder_at = now
    state.save()
    assert reminders(now + timedelta(hours=1)) == []
    (row,) = reminders(now + timedelta(hours=2))
    assert row.event == "reminder" and row.data["execution"]["status"] == "dead" and "Failing since" in row.text
    assert reminders(now + timedelta(hours=3)) == []
    assert len(reminders(now + timedelta(hours=4))) == 1
    job.url = target.url("/ok")
    job.save()
    run(queued(job))  # recovered: no more reminders
    assert reminders(now + timedelta(hours=10)) == []


def test_due_rows_are_handed_over_again(tenant, make_channel, make_job, target, settings):
    queue = f"test.notify.{uuid.uuid4().hex[:12]}"
    settings.NOTIFICATION_QUEUE = queue
    make_channel(tenant)
    run(queued(make_job(tenant, url=target.url("/status/500"), max_attempts=1)))  # its hand-off never happens here
    row = Notification.objects.get()
    resend_due(timezone.now())
    assert redis_client().llen(queue) == 1
    redis_client().delete(queue)
    Notification.objects.filter(id=row.id).update(next_attempt_at=timezone.now() + timedelta(minutes=5))
    resend_due(timezone.now())
    assert redis_client().llen(queue) == 0
