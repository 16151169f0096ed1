"""Real processes: a Celery worker runs a failing job's burst of runs against a local
endpoint, decides the alerts in its recording transactions and sends them (and the
events) itself, after commit; directly on PostgreSQL and through PgBouncer in transaction mode."""

import json
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions.scheduling import publishing
from apps.executions.models import Execution
from apps.notifications.models import Channel, EventSubscription, Notification, OutboxEvent
from apps.notifications.services import save_channel, save_subscription
from tests.support.broker import use_private_queue
from tests.support.processes import start_worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("live_database", ["direct", "pgbouncer"], indirect=True)
def test_burst_of_failures_one_alert_then_recovery_and_events_once(tmp_path, make_tenant, make_job, target,
                                                                   live_database):
    tenant = make_tenant(plan="enterprise")
    run_queue = use_private_queue(tenant)
    notify_queue = f"test.notify.{uuid.uuid4().hex[:12]}"
    save_channel(Channel(project=tenant.project), kind="slack", name="ops", config={"url": target.url("/alerts")})
    subscription = save_subscription(EventSubscription(project=tenant.project), url=target.url("/events"))
    job = make_job(tenant, url=target.url("/status/500"), max_attempts=1)
    burst = [Execution.objects.create(job=job, organization=tenant.organization, queue=run_queue,
                                      scheduled_for=timezone.now() - timedelta(seconds=i + 1)) for i in range(12)]
    worker = start_worker(tmp_path, [run_queue, notify_queue], OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8",
                          NOTIFICATION_QUEUE=notify_queue, **live_database.env)
    try:
        for part in (burst[:4], burst[4:]):  # two messages: the runs are recorded in several groups
            publishing.publish({run_queue: [e.id for e in part]})
        wait_for(lambda: Execution.objects.filter(job=job, status="dead").count() == 12, timeout=60,
                 message="the failing runs")
        wait_for(lambda: len(target.requests_to("/events")) == 12, timeout=60, message="the failure events")
        wait_for(lambda: len(target.requests_to("/alerts")) >= 1, timeout=30, message="the failure alert")
        job.url = target.url("/ok")
        job.save(update_fields=["url"])
        fixed = Execution.objects.create(job=job, organization=tenant.organization, queue=run_queue,
                                         scheduled_for=timezone.now() - timedelta(minutes=1))
        publishing.publish({run_queue: [fixed.id]})
        wait_for(lambda: len(target.requests_to("/alerts")) >= 2, timeout=60, message="the recovery alert")
        wait_for(lambda: len(target.requests_to("/events")) == 13, timeout=30, message="the success event")
    finally:
        code = worker.stop()
    assert code == 0, worker.output()[-3000:]
    alerts = [json.loads(r.body)["text"] for r in target.requests_to("/alerts")]
    assert alerts == [f"Job failing: {job.name}", f"Job recovered: {job.name}"]
    assert list(Notification.objects.values_list("status", flat=True)) == ["sent", "sent"]
    events = target.requests_to("/events")
    executions = [json.loads(r.body)["execution_id"] for r in events]
    assert sorted(executions) == sorted(str(e.id) for e in burst + [fixed])  # one event per outcome
    assert len({r.headers["webhook-id"] for r in events}) == 13
    assert not OutboxEvent.objects.exclude(status="sent").exists()
    assert subscription.id == OutboxEvent.objects.values_list("subscription_id", flat=True).distinct().get()
