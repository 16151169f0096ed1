"""Workflows on real processes: Celery workers, the scheduler (its sweeper) and a local
endpoint, on PostgreSQL and Redis."""

import json
import re
import sys
import threading
from urllib.parse import parse_qs

import pytest
from django.db import connection, transaction

from apps.executions.models import Execution
from apps.executions.scheduling.triggers import trigger_now
from tests.support.broker import use_private_queue
from tests.support.processes import Process, process_env, start_scheduler, start_worker, unique_node_name, wait_for

from .conftest import finish, run_of

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

FAST = dict(OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8", SWEEPER_INTERVAL=0.5, SWEEPER_REPUBLISH_AFTER=30,
            DELIVERY_LEASE_MARGIN=2, REGIONS="east,west")


def bodies(target, path):
    return [r.body.decode() for r in target.requests_to(path)]


def test_a_chain_of_three_passes_data_into_json_and_form_bodies(tmp_path, make_tenant, chain, target):
    tenant = make_tenant(plan="enterprise")
    queue = use_private_queue(tenant)
    jobs = chain(
        tenant, "Extract", ("Transform", [("Extract", "success")]), ("Load", [("Transform", "any")]),
        Extract={"url": target.url("/extract")},
        Transform={"url": target.url("/transform"), "method": "POST", "body_format": "json",
                   "body": '{"from": "{{ upstream.Extract.json.path }}", "ok": {{ upstream.Extract.json.ok }}, '
                           '"code": {{ upstream.Extract.status }}}'},
        Load={"url": target.url("/status/500"), "method": "POST", "body_format": "form", "max_attempts": 1,
              "body": "prev={{ upstream.Transform.json.path }}&outcome={{ upstream.Transform.outcome }}"},
    )
    worker = start_worker(tmp_path, [queue], **FAST)
    try:
        first = trigger_now(jobs["Extract"])
        wait_for(lambda: run_of(jobs["Load"], first.id).filter(status__in=Execution.FINAL_STATUSES).exists(),
                 timeout=60, message="the chain to finish")
    finally:
        assert worker.stop() == 0, worker.output()[-3000:]
    statuses = list(Execution.objects.filter(workflow_run_id=first.id).order_by("created_at")
                    .values_list("job__name", "status"))
    assert statuses == [("Extract", "succeeded"), ("Transform", "succeeded"), ("Load", "dead")]
    assert [json.loads(b) for b in bodies(target, "/transform")] == [{"from": "/extract", "ok": True, "code": 200}]
    assert [parse_qs(b) for b in bodies(target, "/status/500")] == [{"prev": ["/transform"],
                                                                      "outcome": ["succeeded"]}]


@pytest.mark.parametrize("mode", ["all", "any"])
def test_fan_in_on_two_workers_finishing_together_starts_the_downstream_once(tmp_path, make_tenant, chain,
                                                                               target, mode, settings):
    """X runs on the east worker, Y on the west one (regions route them apart); both wait on
    the same slow endpoint, so they finish within moments of each other."""
    settings.REGIONS = ["east", "west"]
    tenant = make_tenant(plan="enterprise")
    queue = use_private_queue(tenant)
    slow = target.url("/slow?seconds=1")
    jobs = chain(tenant, "R", ("X", [("R", "success")]), ("Y", [("R", "success")]),
                 ("Z", [("X", "success"), ("Y", "success")]), mode=mode,
                 R={"url": target.url("/root")}, X={"url": slow, "region": "east"},
                 Y={"url": slow, "region": "west"}, Z={"url": target.url(f"/fan-in-{mode}")})
    east = start_worker(tmp_path, [queue, f"{queue}.east"], name="east", **FAST)
    west = start_worker(tmp_path, [queue, f"{queue}.west"], name="west", **FAST)
    try:
        runs = [trigger_now(jobs["R"], now=None) for _ in range(3)]
        wait_for(lambda: Execution.objects.filter(job=jobs["Z"], status="succeeded").count() == 3
                 and not Execution.objects.filter(status__in=["queued", "running"]).exists(),
                 timeout=90, message="every fan-in to finish")
    finally:
        assert (east.stop(), west.stop()) == (0, 0), east.output()[-2000:] + west.output()[-2000:]
    for run in runs:
        assert run_of(jobs["Z"], run.id).count() == 1
        x, y = run_of(jobs["X"], run.id).get(), run_of(jobs["Y"], run.id).get()
        assert x.queue.endswith(".east") and y.queue.endswith(".west")
    assert len(target.requests_to(f"/fan-in-{mode}")) == 3
    # each worker ran under its own node name (tests/support/processes.unique_node_name)
    assert re.search(r"\beast-[0-9a-f]{8}@", east.output()) and re.search(r"\bwest-[0-9a-f]{8}@", west.output())


def test_simultaneous_upstream_transactions_decide_the_fan_in_once(make_tenant, chain):
    """Deterministic: Y's outcome is recorded while X's recording transaction is still open.
    Y must wait for X's commit (the run's lock), then see both and start Z exactly once."""
    tenant = make_tenant()
    jobs = chain(tenant, "R", ("X", [("R", "success")]), ("Y", [("R", "success")]),
                 ("Z", [("X", "success"), ("Y", "success")]))
    root = finish(trigger_now(jobs["R"]), "succeeded")
    x, y = run_of(jobs["X"], root.id).get(), run_of(jobs["Y"], root.id).get()
    x_recorded, errors = threading.Event(), []

    def record_x():
        try:
            with transaction.atomic():
                finish(x, "succeeded")
                x_recorded.set()
                threading.Event().wait(1.0)  # keep the transaction open while Y records
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            x_recorded.set()
            connection.close()

    def record_y():
        try:
            x_recorded.wait(10)
            finish(y, "succeeded")
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=record_x), threading.Thread(target=record_y)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    (z,) = run_of(jobs["Z"], root.id)
    assert z.status == "queued"
    assert sorted(z.upstream_executions) == sorted([str(x.id), str(y.id)])


def test_a_worker_killed_between_upstream_commit_and_downstream_publish(tmp_path, make_tenant, chain, target):
    tenant = make_tenant(plan="enterprise")
    queue = use_private_queue(tenant)
    jobs = chain(tenant, "A", ("B", [("A", "success")]), A={"url": target.url("/upstream")},
                 B={"url": target.url("/downstream")})
    fast = {**FAST, "SWEEPER_REPUBLISH_AFTER": 2}
    args = [sys.executable, "-m", "tests.workflows.crashing_worker", "--queues", queue, "--pool", "threads",
            "--concurrency", "2", "--hostname", unique_node_name("doomed"), "--without-mingle", "--without-gossip"]
    doomed = Process(args, process_env(**fast), tmp_path / "doomed.log")
    first = trigger_now(jobs["A"])
    try:
        wait_for(lambda: doomed.popen.poll() is not None, timeout=60, message="the worker to die before publishing")
    finally:
        doomed.stop()
    assert doomed.popen.returncode == -9, doomed.output()[-3000:]
    (b,) = run_of(jobs["B"], Execution.objects.get(id=first.id).workflow_run_id)  # committed with A's outcome
    assert (Execution.objects.get(id=first.id).status, b.status) == ("succeeded", "queued")
    assert target.requests_to("/downstream") == []
    scheduler = start_scheduler(tmp_path, **fast)  # its sweeper re-publishes what was never sent
    worker = start_worker(tmp_path, [queue], **fast)
    try:
        wait_for(lambda: Execution.objects.get(id=b.id).status == "succeeded", timeout=60,
                 message="the downstream to be published by the sweeper and run")
    finally:
        assert (scheduler.stop(), worker.stop()) == (0, 0), worker.output()[-3000:]
    assert Execution.objects.filter(job=jobs["B"]).count() == 1
    assert len(target.requests_to("/downstream")) == 1
    assert len(target.requests_to("/upstream")) == 1
