"""The event stream on real PostgreSQL and Redis: what is written, in which order, to
which stream, and that a rolled-back change publishes nothing."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from apps.eventstream import relay
from apps.eventstream.models import OutboxEntry
from apps.executions.worker.batch import run_batch, wait_for_late_runs
from apps.executions.models import Execution
from apps.executions.scheduling.tick import claim_due
from apps.executions.scheduling.triggers import trigger_now

pytestmark = pytest.mark.usefixtures("allow_loopback")


def due_job(make_job, tenant, url, **fields):
    now = timezone.now()
    return make_job(tenant, url=url, schedule_type="interval", interval_seconds=3600, cron_expression="",
                    start_at=now - timedelta(seconds=1), next_run_at=now - timedelta(seconds=1), **fields)


def run(execution_ids):
    """Send and record (on a loaded machine a send may outlast the hand-off: wait for it)."""
    run_batch(execution_ids)
    assert wait_for_late_runs(60)


def test_every_change_of_a_run_is_published_in_order(streams, tenant, make_job, target):
    job = due_job(make_job, tenant, target.url("/flaky?key=order&fail=1"), max_attempts=3,
                  retry_initial_delay_seconds=1)
    assert claim_due(timezone.now(), 10).created == 1
    execution = Execution.objects.get(job=job)
    run([execution.id])  # running, then a 503: queued again for a retry
    Execution.objects.filter(id=execution.id).update(next_attempt_at=timezone.now())
    run([execution.id])  # running, then 200: succeeded
    assert relay.relay_round() == 5
    events = [event for _, event in streams.read_group(streams.of(tenant.organization.id))]
    assert [(e["type"], e["previous"], e["attempt"], e["reason"]) for e in events] == [
        ("execution.queued", None, 0, None),
        ("execution.running", "queued", 1, None),
        ("execution.queued", "running", 1, "retry"),
        ("execution.running", "queued", 2, None),
        ("execution.succeeded", "running", 2, None),
    ]
    retry = events[2]
    assert retry["error_kind"] == "http_5xx" and retry["response_status"] == 503 and retry["next_attempt_at"]
    assert events[4]["response_status"] == 200
    for event in events:
        assert event["organization"] == str(tenant.organization.id)
        assert event["project"] == str(tenant.project.id)
        assert (event["job"], event["execution"]) == (str(job.id), str(execution.id))
        assert event["occurred_at"].endswith("Z") and event["trigger"] == "schedule"
    ids = [int(e["id"]) for e in events]
    assert ids == sorted(ids) and len(set(ids)) == 5
    assert not OutboxEntry.objects.exists()  # deleted once published


def test_a_rolled_back_change_publishes_nothing(streams, tenant, make_job):
    job = make_job(tenant)
    with pytest.raises(RuntimeError), transaction.atomic():
        trigger_now(job)
        assert OutboxEntry.objects.count() == 1  # written with the change...
        raise RuntimeError("the request fails after the run was created")
    assert not OutboxEntry.objects.exists()  # ...and gone with it
    assert relay.relay_round() == 0
    kept = trigger_now(job)
    assert relay.relay_round() == 1
    assert [e["execution"] for _, e in streams.read_group(streams.of(tenant.organization.id))] == [str(kept.id)]


def test_each_organization_has_its_own_stream(streams, make_tenant, make_job):
    first, second = make_tenant(), make_tenant()
    trigger_now(make_job(first))
    trigger_now(make_job(second))
    trigger_now(make_job(second))
    assert relay.relay_round() == 3
    assert [e["organization"] for _, e in streams.read_group(streams.of(first.organization.id))] == [
        str(first.organization.id)]
    assert [e["organization"] for _, e in streams.read_group(streams.of(second.organization.id))] == [
        str(second.organization.id)] * 2


def test_the_deployment_stream_has_every_organization(settings, streams, make_tenant, make_job):
    settings.EVENT_STREAM_DEPLOYMENT = True
    first, second = make_tenant(), make_tenant()
    trigger_now(make_job(first))
    trigger_now(make_job(second))
    relay.relay_round()
    everything = streams.read_group(f"{streams.prefix}:all")
    assert {e["organization"] for _, e in everything} == {str(first.organization.id), str(second.organization.id)}


def test_stream_off_writes_no_outbox_rows(settings, tenant, make_job, target):
    settings.EVENT_STREAM = False
    job = due_job(make_job, tenant, target.url("/ok"))
    claim_due(timezone.now(), 10)
    run(list(Execution.objects.filter(job=job).values_list("id", flat=True)))
    trigger_now(job)
    assert Execution.objects.filter(job=job).count() == 2
    assert not OutboxEntry.objects.exists()
    assert relay.relay_round() == 0


def test_a_resend_after_a_cut_short_round_is_refused_by_redis(streams, tenant, make_job):
    job = make_job(tenant)
    for _ in range(3):
        trigger_now(job)
    # A round that sent its entries and died before deleting them from the outbox:
    relay._number(relay.BATCH)
    numbered = list(OutboxEntry.objects.order_by("stream_id"))
    relay._send(numbered)
    trigger_now(job)  # one more after the crash
    assert relay.relay_round() == 4  # the three again (refused by Redis as already there) and the new one
    key = streams.of(tenant.organization.id)
    entries = streams.read_group(key)
    assert len(entries) == 4 == streams.client.xlen(key)
    assert [entry_id for entry_id, _ in entries] == [f"{e['id']}-0" for _, e in entries]
    assert not OutboxEntry.objects.exists()


def test_maxlen_bounds_each_stream(settings, streams, tenant, make_job):
    settings.EVENT_STREAM_MAXLEN = 50
    job = make_job(tenant)
    now = timezone.now()
    with transaction.atomic():
        for i in range(600):
            trigger_now(job, now=now + timedelta(microseconds=i))
    assert relay.relay_round() == 600
    length = streams.client.xlen(streams.of(tenant.organization.id))
    # MAXLEN ~ trims whole macro nodes (100 entries by default): about 50, never all 600
    assert 50 <= length <= 50 + 100
    last = streams.client.xrevrange(streams.of(tenant.organization.id), count=1)[0][0].decode()
    assert last == f"{relay_last_id()}-0"  # the newest kept


def relay_last_id():
    from apps.eventstream.models import StreamCursor

    return StreamCursor.objects.get(id=1).last_id


def test_only_one_relay_publishes_at_a_time(streams, tenant, make_job):
    from django.db import connections

    trigger_now(make_job(tenant))
    other = connections.create_connection("default")
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_lock(%s)", [relay.LOCK_KEY])
        assert relay.relay_round() == 0  # another scheduler is publishing: this one skips the round
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [relay.LOCK_KEY])
    finally:
        other.close()
    assert relay.relay_round() == 1


def test_a_run_whose_worker_died_goes_back_to_the_queue_with_an_event(streams, tenant, make_job):
    from apps.executions.scheduling import sweeper
    from apps.executions.worker.batch import claim

    execution = trigger_now(make_job(tenant))
    now = timezone.now()
    claim([execution.id], now)
    sweeper.recover_expired_leases(now + timedelta(hours=1))  # the lease ran out: the worker is gone
    relay.relay_round()
    events = [e for _, e in streams.read_group(streams.of(tenant.organization.id))]
    assert [(e["type"], e["reason"]) for e in events] == [
        ("execution.queued", None), ("execution.running", None), ("execution.queued", "lease_expired")]


def test_the_admin_lists_what_waits_to_be_published(streams, tenant, make_job, client):
    from apps.accounts.models import User

    trigger_now(make_job(tenant))
    client.force_login(User.objects.create_superuser(email="ops@example.com", password="x" * 20))
    listing = client.get("/admin/eventstream/outboxentry/")
    assert listing.status_code == 200 and "execution" in listing.content.decode()
    entry = OutboxEntry.objects.get()
    assert client.get(f"/admin/eventstream/outboxentry/{entry.id}/change/").status_code == 200


def test_a_cancelled_run_is_published(streams, tenant, make_job):
    from apps.executions.cancelling import cancel, cancelled_by

    execution = trigger_now(make_job(tenant))
    cancel(execution, by=cancelled_by())
    relay.relay_round()
    events = [e for _, e in streams.read_group(streams.of(tenant.organization.id))]
    assert [(e["type"], e["previous"]) for e in events] == [("execution.queued", None),
                                                           ("execution.cancelled", "queued")]
