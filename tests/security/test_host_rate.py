"""One organization's jobs together cannot exceed the plan's rate to one host (real Redis,
a real local endpoint); another organization's share is its own."""

import pytest
from django.utils import timezone

from apps.executions.worker.batch import run_batch
from apps.executions.models import Execution
from apps.executions.shared_redis import redis_client
from cronsvc.delivery.breaker import host_key
from tests.support.target import start_target

pytestmark = pytest.mark.django_db


@pytest.fixture
def target(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    server = start_target()
    redis_client().delete("cronsvc:cb:" + host_key(server.base_url))
    yield server
    server.close()


def queue_runs(tenant, make_job, url, count):
    now = timezone.now()
    return [Execution.objects.create(job=make_job(tenant, url=url), organization=tenant.organization,
                                     scheduled_for=now, queue="q").id for _ in range(count)]


def test_many_jobs_to_one_host_share_the_plans_rate(make_tenant, make_job, target, settings):
    settings.HOST_RATE_PER_MINUTE = {"*": 2}  # a burst of 2, then one request per 30 s
    a, b = make_tenant(), make_tenant()
    ids = queue_runs(a, make_job, target.url("/a"), 4)
    other = queue_runs(b, make_job, target.url("/b"), 1)
    run_batch(ids + other)

    runs = list(Execution.objects.filter(id__in=ids).order_by("next_attempt_at"))
    sent = [r for r in runs if r.status == "succeeded"]
    held = [r for r in runs if r.status == "queued"]
    assert len(sent) == 2 and len(held) == 2  # the burst went, the rest waits
    assert len(target.requests_to("/a")) == 2
    waits = sorted((r.next_attempt_at - timezone.now()).total_seconds() for r in held)
    assert waits[0] > 20 and waits[1] > waits[0] + 20  # spread out, one token apart
    assert Execution.objects.get(id=other[0]).status == "succeeded"  # B's own bucket


def test_zero_turns_the_limit_off(make_tenant, make_job, target, settings):
    settings.HOST_RATE_PER_MINUTE = {"*": 0}
    a = make_tenant()
    ids = queue_runs(a, make_job, target.url("/c"), 3)
    run_batch(ids)
    assert Execution.objects.filter(id__in=ids, status="succeeded").count() == 3
