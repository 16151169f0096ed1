"""Events out: written with the outcome, sent after commit, once, signed."""

import json
import threading
import uuid

import pytest
from django.db import connections, transaction
from standardwebhooks import Webhook

from apps.executions.shared_redis import redis_client
from apps.notifications.models import EventSubscription, OutboxEvent
from apps.notifications.sending import deliver_event
from apps.notifications.services import save_subscription

from .conftest import queued, run


def subscribe(tenant, url, types=None):
    return save_subscription(EventSubscription(project=tenant.project), url=url, event_types=types)


def test_each_outcome_writes_one_event_per_subscriber(tenant, make_job, target):
    everything = subscribe(tenant, target.url("/all"))
    failures = subscribe(tenant, target.url("/fail"), ["job.execution.failed", "job.execution.dead"])
    ok_job = make_job(tenant, url=target.url("/ok"))
    bad_job = make_job(tenant, url=target.url("/status/500"), max_attempts=1)
    (ok,) = run(queued(ok_job))
    (bad,) = run(queued(bad_job))
    rows = {(row.subscription_id, row.execution_id): row for row in OutboxEvent.objects.all()}
    assert set(rows) == {(everything.id, ok.id), (everything.id, bad.id), (failures.id, bad.id)}
    payload = rows[(everything.id, bad.id)].payload
    assert payload["type"] == "job.execution.dead" and payload["status"] == "dead"
    assert payload["job_id"] == str(bad_job.id) and payload["project"] == str(tenant.project.id)
    assert payload["error"]["kind"] == bad.error_kind and payload["duration_ms"] == bad.duration_ms
    assert rows[(everything.id, ok.id)].payload["error"] is None


def test_an_event_is_delivered_once_and_verifiable(tenant, make_job, target):
    subscription = subscribe(tenant, target.url("/events"))
    (execution,) = run(queued(make_job(tenant, url=target.url("/ok"))))
    row = OutboxEvent.objects.get()
    assert deliver_event(row.id) == "sent"
    assert deliver_event(row.id) is None
    (received,) = target.requests_to("/events")
    payload = Webhook(subscription.secret).verify(received.body, received.headers)
    assert payload["execution_id"] == str(execution.id) and payload["type"] == "job.execution.succeeded"
    assert received.headers["webhook-id"] == f"evt_{row.id}"


def test_job_disabled_event(tenant, make_job, target):
    plan = tenant.organization.plan
    plan.auto_disable_after_failures = 2
    plan.save()
    subscribe(tenant, target.url("/events"), ["job.disabled"])
    job = make_job(tenant, url=target.url("/status/500"), max_attempts=1)
    run(queued(job))
    assert not OutboxEvent.objects.exists()
    run(queued(job))
    (row,) = OutboxEvent.objects.all()
    assert row.type == "job.disabled" and row.payload["job_id"] == str(job.id)


def test_a_rolled_back_outcome_sends_nothing(tenant, make_job, target, django_capture_on_commit_callbacks):
    subscribe(tenant, target.url("/events"))
    job = make_job(tenant, url=target.url("/ok"))
    execution = queued(job)
    with django_capture_on_commit_callbacks() as callbacks:
        try:
            with transaction.atomic():
                run(execution)
                assert OutboxEvent.objects.count() == 1
                raise RuntimeError("crash before commit")
        except RuntimeError:
            pass
    assert not OutboxEvent.objects.exists()
    assert callbacks == []  # nothing handed to the sender


@pytest.mark.django_db(transaction=True)
def test_nothing_is_sent_before_the_outcome_commits(tenant, make_job, target, settings):
    queue = f"test.notify.{uuid.uuid4().hex[:12]}"
    settings.NOTIFICATION_QUEUE = queue
    broker = redis_client()
    subscribe(tenant, target.url("/events"))
    execution = queued(make_job(tenant, url=target.url("/ok")))
    seen_from_outside = []

    def look_from_another_connection():
        seen_from_outside.append(OutboxEvent.objects.count())
        connections.close_all()

    with transaction.atomic():
        run(execution)
        assert OutboxEvent.objects.count() == 1  # written in the outcome's transaction
        reader = threading.Thread(target=look_from_another_connection)
        reader.start()
        reader.join()
        assert broker.llen(queue) == 0  # not handed over yet
        assert target.requests_to("/events") == []
    assert seen_from_outside == [0]  # invisible until the commit
    assert broker.llen(queue) == 1  # handed over at commit
    message = json.loads(broker.lpop(queue))
    assert message["headers"]["task"] == "apps.notifications.tasks.send_events"
    (row,) = OutboxEvent.objects.all()
    assert deliver_event(row.id) == "sent" and len(target.requests_to("/events")) == 1
