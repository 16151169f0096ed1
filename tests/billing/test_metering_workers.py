"""Metering under real concurrency: two worker processes (and a scheduler publishing the
retries) record many runs at once, with every message delivered twice; the monthly and
daily counters equal the attempts stored, neither lost nor doubled."""

from datetime import timedelta

import pytest
from django.db.models import Sum
from django.utils import timezone

from apps.executions.models import Attempt, Execution, UsageDay, UsageMonth
from apps.executions.scheduling import publishing
from tests.support.broker import use_private_queue
from tests.support.processes import start_scheduler, start_worker, wait_for
from tests.support.target import start_target

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ENV = dict(OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", SWEEPER_INTERVAL=0.5, SWEEPER_REPUBLISH_AFTER=30,
           DELIVERY_LEASE_MARGIN=2, BREAKER_FAILURE_THRESHOLD=100000)


def test_two_workers_count_every_attempt_exactly_once(tmp_path, make_tenant, make_job):
    tenant = make_tenant(plan="enterprise")
    queue = use_private_queue(tenant)
    target = start_target()
    ok_jobs = [make_job(tenant, url=target.url(f"/ok/{i}")) for i in range(6)]
    # three failing jobs of ten runs each: no job reaches its auto-disable threshold, which
    # would end the runs still waiting for their retry
    failing = [make_job(tenant, url=target.url(f"/status/503?job={n}"), max_attempts=2,
                        retry_initial_delay_seconds=1, retry_max_delay_seconds=1) for n in range(3)]
    start = timezone.now() - timedelta(hours=1)
    ids = [Execution.objects.create(job=ok_jobs[i % 6], organization=tenant.organization, queue=queue,
                                    scheduled_for=start + timedelta(seconds=i)).id for i in range(240)]
    ids += [Execution.objects.create(job=failing[i % 3], organization=tenant.organization, queue=queue,
                                     scheduled_for=start + timedelta(seconds=i)).id for i in range(30)]
    workers = [start_worker(tmp_path, [queue], name=f"w{n}", **ENV) for n in range(2)]
    scheduler = start_scheduler(tmp_path, **ENV)
    try:
        for _ in range(2):  # every message twice: the redelivery must count nothing
            publishing.publish({queue: ids})
        wait_for(lambda: Execution.objects.filter(id__in=ids, status__in=Execution.FINAL_STATUSES).count() == 270,
                 timeout=120, message="every run to finish")
    finally:
        codes = [worker.stop() for worker in workers] + [scheduler.stop()]
        target.close()
    assert codes == [0, 0, 0], workers[0].output()[-2000:]
    stored = Attempt.objects.filter(execution__organization=tenant.organization)
    attempts = stored.count()
    # Every run was attempted, and each attempt is stored once whatever the redelivery. (A
    # failing run may end after one attempt on a loaded machine: a timeout is not retried.)
    assert attempts == Execution.objects.filter(id__in=ids).aggregate(n=Sum("attempt"))["n"]
    assert 270 <= attempts <= 300
    month = UsageMonth.objects.get(organization=tenant.organization)
    assert month.runs == attempts
    days = UsageDay.objects.filter(organization=tenant.organization).aggregate(
        runs=Sum("runs"), ok=Sum("succeeded"), failed=Sum("failed"))
    succeeded = stored.filter(outcome="succeeded").count()
    others = list(stored.exclude(outcome="succeeded").exclude(execution__job__in=failing)
                  .values_list("outcome", "error_kind", "error_message")[:5])
    assert succeeded == 240, others
    assert (days["runs"], days["ok"], days["failed"]) == (attempts, succeeded, attempts - succeeded)
