"""Connection storms (issue 38): thousands of runs due at once for one slow host.

The worker opens at most DELIVERY_MAX_CONNECTIONS_PER_HOST connections to a host and queues
the rest of its runs for that host; time spent in that queue is ours, not the host's, so it
neither counts against a run's timeout nor feeds the host's circuit breaker. The breaker
still opens when the host itself fails.
"""

import socket
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.executions.worker import batch
from apps.executions.worker.batch import run_batch
from apps.executions.models import Attempt, Execution
from apps.executions.worker.outbound import guards, redis_client
from cronsvc.delivery.breaker import host_key

pytestmark = pytest.mark.usefixtures("allow_loopback")

STORM = 3000


class SlowHost:
    """A host that answers every request after ``delay`` seconds, with a small listen
    backlog like a real server's, and counts how many connections it had open at once."""

    def __init__(self, delay, backlog=64):
        self.delay = delay
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(backlog)
        self.open_now = self.most_open = self.answered = 0
        self.lock = threading.Lock()
        self.closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self):
        return "http://127.0.0.1:%d/slow" % self.sock.getsockname()[1]

    def _accept(self):
        while not self.closing:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.open_now += 1
                self.most_open = max(self.most_open, self.open_now)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn):
        body = b"slow ok"
        answer = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                buf = buf.split(b"\r\n\r\n", 1)[1]  # GETs: no body
                time.sleep(self.delay)
                conn.sendall(answer)
                with self.lock:
                    self.answered += 1
        except OSError:
            return
        finally:
            conn.close()
            with self.lock:
                self.open_now -= 1

    def close(self):
        self.closing = True
        self.sock.close()


@pytest.fixture
def slow_host():
    host = SlowHost(delay=0.1)
    redis_client().delete("cronsvc:cb:" + host_key(host.url))
    guards.cache_clear()
    yield host
    host.close()
    guards.cache_clear()


@pytest.fixture
def storm_capacity(settings):
    """A worker process that may hold the whole storm in flight at once."""
    settings.DELIVERY_MAX_INFLIGHT = STORM
    saved = batch._pool["capacity"]
    batch._pool["capacity"] = batch._Capacity(STORM)
    yield
    batch._pool["capacity"] = saved


def storm_of_runs(tenant, make_job, url, count):
    plan = tenant.organization.plan
    plan.max_concurrency = count  # the customer's own cap is not what this is about
    plan.save()
    jobs = [make_job(tenant, url=url, timeout_seconds=5, max_attempts=1) for _ in range(20)]
    due = timezone.now() - timedelta(seconds=1)
    rows = Execution.objects.bulk_create(
        Execution(job=jobs[i % len(jobs)], organization=tenant.organization, queue="q",
                  scheduled_for=due - timedelta(milliseconds=i))
        for i in range(count))
    return [row.id for row in rows]


@pytest.mark.slow
def test_a_storm_for_one_slow_host_is_queued_not_tripped_nor_deferred(settings, make_tenant, make_job, slow_host,
                                                                       storm_capacity):
    settings.DELIVERY_HANDOFF_SECONDS = 120
    settings.DELIVERY_MAX_CONNECTIONS_PER_HOST = 50
    tenant = make_tenant(plan="enterprise")  # no per-host rate limit: every run may go now
    ids = storm_of_runs(tenant, make_job, slow_host.url, STORM)

    run_batch(ids)

    statuses = dict(Execution.objects.filter(id__in=ids).values_list("status").annotate(n=_count()))
    assert statuses == {"succeeded": STORM}
    assert Attempt.objects.filter(execution_id__in=ids).count() == STORM  # none deferred: one attempt each
    assert slow_host.answered == STORM
    assert slow_host.most_open <= 50
    assert not redis_client().exists("cronsvc:cb:" + host_key(slow_host.url))  # the breaker stayed closed


def test_the_breaker_still_opens_when_the_host_really_fails(settings, make_tenant, make_job, storm_capacity):
    settings.BREAKER_FAILURE_THRESHOLD = 5
    settings.DELIVERY_MAX_CONNECTIONS_PER_HOST = 10
    with socket.socket() as sock:  # a port nobody listens on: every connect is refused
        sock.bind(("127.0.0.1", 0))
        url = "http://127.0.0.1:%d/" % sock.getsockname()[1]
    redis_client().delete("cronsvc:cb:" + host_key(url))
    guards.cache_clear()
    try:
        tenant = make_tenant(plan="enterprise")
        first = storm_of_runs(tenant, make_job, url, 200)
        run_batch(first)
        assert set(Execution.objects.filter(id__in=first).values_list("error_kind", flat=True)) == {"connect_error"}
        later = storm_of_runs(tenant, make_job, url, 20)
        run_batch(later)
        deferred = Execution.objects.filter(id__in=later)
        assert {(e.status, e.error_kind, e.attempt) for e in deferred} == {("queued", "circuit_open", 0)}
    finally:
        guards.cache_clear()


def _count():
    from django.db.models import Count

    return Count("id")
