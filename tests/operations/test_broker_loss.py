"""A worker keeps running when its broker restarts while it holds unacknowledged messages
(config/worker_consumer.py): Celery 5.7 with the Redis transport otherwise exits on
"Unrecoverable error: AttributeError", and under honcho one exiting process stops every
other one. Its runs still finish, once each."""

import time

import pytest
from celery import Celery

from apps.executions.models import Execution
from apps.executions.tasks import RUN_TASK
from soak.services import PrivateRedis
from tests.support.broker import queued_runs, use_private_queue
from tests.support.processes import start_scheduler, start_worker, wait_for
from tests.support.target import start_target

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ENV = dict(OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", SWEEPER_INTERVAL=0.5, SWEEPER_REPUBLISH_AFTER=5,
           DELIVERY_LEASE_MARGIN=2)


def test_a_worker_survives_a_redis_restart_with_runs_in_flight(tmp_path, make_tenant, make_job):
    tenant = make_tenant(plan="enterprise")
    queue = use_private_queue(tenant)
    target = start_target()
    job = make_job(tenant, url=target.url("/slow?seconds=4"), timeout_seconds=20)
    ids = queued_runs(job, queue, 3)
    redis = PrivateRedis(tmp_path)
    redis.start()
    env = dict(ENV, REDIS_URL=redis.url)
    worker = start_worker(tmp_path, [queue], name="broker-loss", **env)
    scheduler = None
    try:
        worker.wait_ready()
        sender = Celery(broker=redis.url, set_as_current=False)
        for execution_id in ids:  # one message each: three unacknowledged at once
            sender.send_task(RUN_TASK, args=[[str(execution_id)]], queue=queue)
        wait_for(lambda: Execution.objects.filter(id__in=ids, status="running").count() == 3, timeout=30,
                 message="the runs to start")
        redis.restart(down_seconds=1.0)
        time.sleep(3.0)  # the consumer notices, cleans up and reconnects
        assert worker.popen.poll() is None, worker.output()[-3000:]
        scheduler = start_scheduler(tmp_path, **env)  # its sweeper hands back anything lost
        wait_for(lambda: Execution.objects.filter(id__in=ids, status="succeeded").count() == 3, timeout=90,
                 message="every run to finish")
        assert "Unrecoverable error" not in worker.output()
    finally:
        code = worker.stop()
        if scheduler:
            scheduler.stop()
        redis.stop()
        target.close()
    assert code == 0, worker.output()[-3000:]
    assert [e.attempt for e in Execution.objects.filter(id__in=ids)] == [1, 1, 1]
