"""Priority under overload with real processes: a Celery worker consuming the plan's
sub-queues in the Procfile's order, a scheduler with a low overload threshold, a local
endpoint, on PostgreSQL and Redis or RabbitMQ. A high run overtakes a backlog of low ones;
a low run that comes due while the queue is overloaded is held, then run (none lost)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions.scheduling import publishing
from apps.executions.models import Execution
from apps.executions.routing import priority_queues, queue_for
from apps.jobs.models import Job
from tests.support.processes import start_scheduler, start_worker, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FAST = dict(OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", SWEEPER_INTERVAL=0.5, SWEEPER_REPUBLISH_AFTER=300,
            SWEEPER_REPUBLISH_IDLE_AFTER=300, OVERLOAD_QUEUE_DEPTH=3, OVERLOAD_CHECK_INTERVAL=0.2)
BACKLOG = 3000  # low runs: 30 messages of 100, each taking the endpoint's 0.2 s or more


def low_backlog(job, queue, count):
    """``count`` queued low runs of ``job`` published to the plan's low sub-queue."""
    start = timezone.now() - timedelta(hours=2)
    rows = Execution.objects.bulk_create(
        Execution(job=job, organization=job.organization, queue=queue, scheduled_for=start + timedelta(seconds=i),
                  published_at=timezone.now()) for i in range(count))
    published = publishing.publish({queue: [row.id for row in rows]})
    assert published == count
    return rows


@pytest.mark.parametrize("live_broker", ["redis", "rabbitmq"], indirect=True)
def test_high_runs_overtake_a_low_backlog_and_held_low_runs_run_later(tmp_path, make_tenant, make_job, target,
                                                                      live_broker):
    tenant = make_tenant(plan="enterprise")
    plan_queue = live_broker.private_queue(tenant)
    low_queue = queue_for(plan_queue, priority="low")
    live_broker.queues.update(priority_queues(plan_queue))  # dropped after the test on RabbitMQ
    backlog_job = make_job(tenant, url=target.url("/slow?seconds=0.2"), priority="low", next_run_at=None)
    backlog = low_backlog(backlog_job, low_queue, BACKLOG)

    worker = start_worker(tmp_path, priority_queues(plan_queue), concurrency=1, **FAST, **live_broker.env)
    scheduler = None
    try:
        wait_for(lambda: Execution.objects.filter(job=backlog_job, started_at__isnull=False).exists(), timeout=60,
                 message="the worker to start on the backlog")
        now = timezone.now()
        yearly = "0 0 1 1 *"  # one occurrence in the test: the one due now
        high = make_job(tenant, url=target.url("/high"), priority="high", cron_expression=yearly, next_run_at=now)
        held = make_job(tenant, url=target.url("/held"), priority="low", cron_expression=yearly, next_run_at=now)
        scheduler = start_scheduler(tmp_path, **FAST, **live_broker.env)
        wait_for(lambda: Execution.objects.filter(job=high, status="succeeded").exists(), timeout=60,
                 message="the high run to succeed")
        high_run = Execution.objects.get(job=high, scheduled_for=now)
        waiting_low = Execution.objects.filter(job=backlog_job, started_at__isnull=True).count()
        wait_for(lambda: Execution.objects.filter(job=held, status="succeeded").exists(), timeout=120,
                 message="the held low run to run once the backlog drained")
        wait_for(lambda: Execution.objects.filter(job=backlog_job, status="succeeded").count() == BACKLOG,
                 timeout=120, message="the whole backlog to run")
    finally:
        codes = [process.stop() for process in (worker, scheduler) if process is not None]
    assert codes == [0] * len(codes), worker.output()[-3000:]

    # Published last, taken before the low runs still waiting in line.
    assert high_run.queue == f"{plan_queue}--high"
    assert waiting_low > 0, "the high run waited behind the whole low backlog"
    assert Execution.objects.filter(job=backlog_job, started_at__gt=high_run.started_at).count() >= waiting_low

    # Held while the plan's queue was overloaded (recorded), run later, once.
    (held_run,) = Execution.objects.filter(job=held, scheduled_for=now)
    assert (held_run.status, held_run.defer_reason, held_run.queue) == ("succeeded", "overload", low_queue)
    assert held_run.started_at > high_run.started_at
    assert len(target.requests_to("/held")) == 1
    # Nothing of the backlog lost.
    assert Execution.objects.filter(id__in=[row.id for row in backlog], status="succeeded").count() == BACKLOG
    assert Job.objects.get(pk=held.pk).priority == "low"
