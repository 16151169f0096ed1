"""A seeded randomized interleaving of a run's life on real PostgreSQL (docs/architecture.md,
"Fenced leases").

Worker threads (each standing for a worker process: its own heartbeat, which stops while
the worker stalls past its lease), a sweeper thread, a deleter and a canceller run the
real statements — the claim (queries.CLAIM), the heartbeat (leases.LeaseRenewer), the fenced
recording (recording.record_attempts), the sweeper's take-back and due-retry publishing,
job deletion and cancel — with random pauses between them, over thousands of runs. The
"broker" is a shared list (duplicates allowed, as with a real one); the "target" records
every request a worker sends (webhook-id from the real header builder, the lease token it
was sent under, the database's time of its claim). The invariants are then checked from
the database and the target:

- at most one outcome per (run, attempt): the run's own attempts are 1..attempt, once each;
- no change by a superseded token: no superseded attempt's token ever moved its run, and a
  run a worker finished still carries that worker's token;
- nothing sent before it was due (by the database's clock);
- every run ends final (after the retries it waits for);
- a second request for the same attempt only after the previous holder's lease really
  expired, with the same webhook-id.
"""

import random
import threading
import time
from collections import defaultdict
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

import cronsvc
from apps.executions import cancelling, purging, queries
from apps.executions.worker import batch, recording
from apps.executions.scheduling import sweeper
from apps.executions.worker.leases import LeaseRenewer
from apps.executions.models import Attempt, Execution
from cronsvc.delivery.request import prepare

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

SEED = 20261206
RUNS = 2000
JOBS = 40
WORKERS = 4
LEASE = 1.0
FINAL = set(Execution.FINAL_STATUSES)


class World:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.broker = []
        self.sent = []  # (execution id, webhook-id, token, attempt number, claimed at (db))
        self.granted = {}  # (execution id, token) -> latest lease expiry granted under it (db)
        self.moved_by = defaultdict(set)  # execution id -> tokens whose recording moved it
        self.due = {}  # (execution id, attempt number) -> not before (db)
        self.stop = threading.Event()
        self.errors = []

    def publish(self, ids):
        with self.lock:
            self.broker.extend(ids)

    def take(self, rng, count):
        with self.lock:
            rng.shuffle(self.broker)
            taken, self.broker[:] = self.broker[:count], self.broker[count:]
            return taken

    def grant(self, held, until):
        with self.lock:
            self.granted[held] = max(until, self.granted.get(held, until))


def _pause(rng, longest=0.01):
    time.sleep(rng.random() * longest)


def _lease_ends(ids_tokens):
    """(id, token) -> lease_expires_at now, for those still held under the token."""
    rows = Execution.objects.filter(id__in=[i for i, _ in ids_tokens]).values_list("id", "lease_token",
                                                                                      "lease_expires_at")
    wanted = dict(ids_tokens)
    return {(i, token): until for i, token, until in rows if wanted.get(i) == token and until is not None}


def _result(execution, number, status, finished, retry_in=None):
    ok = status == "succeeded"
    return recording.FinishedAttempt(
        execution=execution, status=status, auto_disable_after=0,
        next_attempt_at=finished + timedelta(seconds=retry_in) if retry_in is not None else None,
        attempt=recording.AttemptValues(
            number=number, started_at=finished, finished_at=finished, duration_ms=1, request_method="POST",
            request_url="https://example.com/", request_headers={}, request_body="",
            response_status=200 if ok else 503, response_headers={}, response_body="", remote_addr="",
            outcome="succeeded" if ok else "failed", error_kind="" if ok else "http_5xx",
            error_message="" if ok else "HTTP 503"))


def _stall_until_taken_over(claimed, rng):
    tokens = {e.id: e.lease_token for e in claimed}
    until = time.monotonic() + LEASE * rng.uniform(2.0, 4.0)
    while time.monotonic() < until:
        time.sleep(0.05)
        rows = Execution.objects.filter(id__in=list(tokens), status="running").values_list("id", "lease_token")
        if any(token > tokens[i] + 1 for i, token in rows):  # taken back (+1) and claimed again (+2)
            return


def worker(world, number, jobs):
    rng = random.Random(SEED * 100 + number)
    heart = LeaseRenewer(LEASE, thread=False)
    width = len(queries.CLAIMED_COLUMNS)
    claims = 0
    try:
        while not world.stop.is_set():
            ids = world.take(rng, rng.randint(1, 60))
            if not ids:
                time.sleep(0.01)
                continue
            rows = queries.claim_queued(ids, lease_seconds=LEASE)
            if not rows:
                continue
            claims += 1
            claimed_at = rows[0][width + 2]
            claimed = [Execution.from_db(connection.alias, queries.CLAIMED_COLUMNS, row[:width]) for row in rows]
            for execution in claimed:
                world.grant((execution.id, execution.lease_token), claimed_at + timedelta(seconds=LEASE))
            heart.hold(claimed)
            _pause(rng)
            for execution in claimed:  # the requests go out
                job = jobs[execution.job_id]
                sent = prepare(batch.request_spec(job), variables={}, job_id=job.id, execution_id=execution.id,
                               attempt=execution.attempt + 1, scheduled_for=execution.scheduled_for,
                               signing_secrets=[], timestamp=0, version=cronsvc.__version__)
                with world.lock:
                    world.sent.append((execution.id, sent.headers["webhook-id"], execution.lease_token,
                                       execution.attempt + 1, claimed_at))
            # worker-0's first claim always stalls: a quick run (a quiet machine, few claims a
            # worker) had, once in CI, no stall at all and so nothing to supersede.
            if rng.random() < 0.05 or (number == 0 and claims == 1):
                # The worker stalls past its lease (SIGSTOP, a VM pause): no heartbeat. The
                # adversarial pause: it resumes as soon as another worker holds one of its
                # runs again (the window where only the token tells the two apart), or later.
                _stall_until_taken_over(claimed, rng)
            elif rng.random() < 0.3:
                for _ in range(rng.randint(1, 3)):  # a slow endpoint: the heartbeat keeps the leases
                    _pause(rng, LEASE / 2)
                    heart.beat()
                    for held, until in _lease_ends([(e.id, e.lease_token) for e in claimed]).items():
                        world.grant(held, until)
            finished = timezone.now()
            results = []
            for execution in claimed:
                number, roll = execution.attempt + 1, rng.random()
                if roll < 0.25 and number < 3:
                    results.append(_result(execution, number, "queued", finished, retry_in=rng.uniform(0.05, 0.4)))
                else:
                    results.append(_result(execution, number, "succeeded" if roll < 0.9 else "failed", finished))
            _pause(rng)
            moved = recording.record_attempts(results)
            heart.release([e.id for e in claimed])
            retried = [r.execution.id for r in results if r.execution.id in moved and r.status == "queued"]
            with world.lock:
                for r in results:
                    if r.execution.id in moved:
                        world.moved_by[r.execution.id].add(r.execution.lease_token)
            for execution_id, attempt, due in Execution.objects.filter(id__in=retried, status="queued").values_list(
                    "id", "attempt", "next_attempt_at"):
                with world.lock:
                    world.due[(execution_id, attempt + 1)] = due
    except Exception as exc:  # noqa: BLE001 - reported by the test
        world.errors.append((threading.current_thread().name, exc))
        raise
    finally:
        connection.close()


def sweeper_thread(world):
    rng = random.Random(SEED + 1)
    try:
        while not world.stop.is_set():
            rows = sweeper.recover_expired_leases() + sweeper.due_retries()
            rows += sweeper.stale(republish_after=10)
            world.publish([execution_id for execution_id, _ in rows])
            _pause(rng, 0.2)
    except Exception as exc:  # noqa: BLE001
        world.errors.append((threading.current_thread().name, exc))
        raise
    finally:
        connection.close()


def deleter(world, doomed):
    rng = random.Random(SEED + 2)
    try:
        for job in doomed:
            _pause(rng, 1.5)
            for _ in range(5):  # a deadlock with a worker's statements aborts the delete: asked again
                try:
                    purging.delete_jobs([job])
                    break
                except Exception as exc:  # Django's OperationalError, or psycopg's from a raw cursor
                    if "deadlock detected" not in str(exc):
                        raise
    except Exception as exc:  # noqa: BLE001
        world.errors.append((threading.current_thread().name, exc))
        raise
    finally:
        connection.close()


def canceller(world, ids):
    rng = random.Random(SEED + 3)
    by = cancelling.cancelled_by()
    try:
        for execution_id in rng.sample(ids, 60):
            _pause(rng, 0.1)
            execution = Execution.objects.filter(id=execution_id).first()
            if execution is None:
                continue
            try:
                cancelling.cancel(execution, by=by)
            except cancelling.ExecutionFinished:
                pass
    except Exception as exc:  # noqa: BLE001
        world.errors.append((threading.current_thread().name, exc))
        raise
    finally:
        connection.close()


def test_random_interleavings_keep_the_invariants_of_a_run(make_tenant, make_job, monkeypatch, settings):
    settings.LEASE_MAX_RECLAIMS = 50  # the cap is tested on its own (test_fencing.py); here every run finishes
    monkeypatch.setattr(purging, "_publish_purge", lambda job_id: None)  # no purge task to a broker
    tenant = make_tenant()
    jobs = {job.id: job for job in (make_job(tenant, url=f"https://example.com/{i}") for i in range(JOBS))}
    job_list = list(jobs.values())
    now = timezone.now()
    rng = random.Random(SEED)
    executions = []
    for i in range(RUNS):
        early = rng.random() < 0.05  # published before it is due
        scheduled = now + timedelta(seconds=rng.uniform(1, 4)) if early else now - timedelta(seconds=i + 1)
        executions.append(Execution(job=job_list[i % JOBS], organization=tenant.organization, queue="q",
                                    scheduled_for=scheduled + timedelta(microseconds=i), published_at=now))
    Execution.objects.bulk_create(executions)
    scheduled_for = {e.id: e.scheduled_for for e in executions}
    ids = list(scheduled_for)
    world = World(SEED)
    world.publish(ids)
    doomed = job_list[:3]

    threads = [threading.Thread(target=worker, args=(world, n, jobs), name=f"worker-{n}") for n in range(WORKERS)]
    threads += [threading.Thread(target=sweeper_thread, args=(world,), name="sweeper"),
                threading.Thread(target=deleter, args=(world, doomed), name="deleter"),
                threading.Thread(target=canceller, args=(world, ids), name="canceller")]
    for thread in threads:
        thread.start()
    started = time.monotonic()
    deadline = started + 180  # a bound for loaded machines (measured: ~60 s at load average 15, 190 s at 24)
    try:
        while time.monotonic() < deadline and not world.errors:
            time.sleep(0.5)
            if not Execution.objects.filter(id__in=ids).exclude(status__in=FINAL).exists():
                break
    finally:
        world.stop.set()
        for thread in threads:
            thread.join(30)
    assert not world.errors, world.errors

    rows = {e.id: e for e in Execution.objects.filter(id__in=ids)}
    # every run ends final (a deleted job's unfinished runs are gone with it)
    unfinished = [(e.id, e.status) for e in rows.values() if e.status not in FINAL]
    assert not unfinished, (f"{len(unfinished)} unfinished after {time.monotonic() - started:.0f} s", unfinished[:5])
    assert len(rows) < RUNS  # the deleter took some in flight or waiting

    own, superseded = defaultdict(list), defaultdict(list)
    for execution_id, number, token in Attempt.objects.filter(execution_id__in=ids).values_list(
            "execution_id", "number", "superseded_token"):
        (superseded[execution_id].append(token) if token else own[execution_id].append(number))
    # at most one outcome per (run, attempt), and none missing
    for execution_id, e in rows.items():
        numbers = sorted(own[execution_id])
        assert len(numbers) == len(set(numbers)), (execution_id, numbers)
        if e.status == "cancelled":
            assert set(numbers) <= set(range(1, e.attempt + 2)), (execution_id, numbers, e.attempt)
        else:
            assert numbers == list(range(1, e.attempt + 1)), (execution_id, numbers, e.attempt, e.status)
    # no change by a superseded token
    for execution_id, tokens in superseded.items():
        assert not set(tokens) & world.moved_by[execution_id], execution_id
    for execution_id, e in rows.items():
        if e.status in ("succeeded", "failed") and world.moved_by[execution_id]:
            assert e.lease_token == max(world.moved_by[execution_id]), execution_id
    assert sum(len(tokens) for tokens in superseded.values()) > 0  # stalls did supersede some workers

    by_run = defaultdict(list)
    for execution_id, webhook_id, token, number, claimed_at in world.sent:
        # nothing sent before it was due, by the database's clock
        assert claimed_at >= scheduled_for[execution_id], execution_id
        due = world.due.get((execution_id, number))
        if due is not None:
            assert claimed_at >= due, (execution_id, number)
        by_run[execution_id].append((claimed_at, token, number, webhook_id))
    resent = 0
    for execution_id, sends in by_run.items():
        sends.sort()
        assert {webhook_id for *_, webhook_id in sends} == {str(execution_id)}  # the same webhook-id
        for (_, token, number, _), (later_at, _, later_number, _) in zip(sends, sends[1:]):
            if later_number == number:  # a second request for the same attempt
                resent += 1
                # only after the previous holder's lease really expired
                assert world.granted[(execution_id, token)] < later_at, (execution_id, number)
    assert resent > 0
