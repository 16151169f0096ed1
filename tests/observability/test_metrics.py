"""/metrics: who may read it, what the scrape-time collectors report, and the hot-path
helpers counting the same as prometheus-client itself."""

import pytest
from django.utils import timezone
from prometheus_client import CollectorRegistry, Histogram

from apps.executions.hooks import RunOutcome
from apps.executions.shared_redis import redis_client
from apps.observability import metrics
from apps.observability.outcomes import on_outcomes
from apps.observability.views import _address_allowed, _networks

from .scrape import scrape, value

pytestmark = pytest.mark.django_db


def test_observe_many_counts_like_observe():
    registry = CollectorRegistry()
    one = Histogram("one", "h", buckets=(0.1, 1, 10), registry=registry)
    many = Histogram("many", "h", buckets=(0.1, 1, 10), registry=registry)
    values = [0.0, 0.1, 0.10001, 0.5, 1, 3, 10, 11, 1e6]
    for v in values:
        one.observe(v)
    metrics.observe_many(many, values)
    for suffix, labels in [("_count", {}), ("_sum", {})] + [("_bucket", {"le": le}) for le in ("0.1", "1.0", "10.0", "+Inf")]:
        assert registry.get_sample_value("many" + suffix, labels) == registry.get_sample_value("one" + suffix, labels)


def test_metrics_are_404_when_not_enabled(client, settings):
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = []
    assert client.get("/metrics").status_code == 404


def test_metrics_need_the_token_or_an_allowed_address(client, settings):
    settings.METRICS_TOKEN = "s3cret-token"
    settings.METRICS_ALLOWED_IPS = ["10.0.0.0/8"]
    refused = client.get("/metrics")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "metrics_forbidden"
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 200
    assert client.get("/metrics", REMOTE_ADDR="11.1.2.3").status_code == 403


def test_allow_list_matches_cidrs_of_both_families():
    networks = _networks(("127.0.0.1/32", "::1/128", "192.168.0.0/16"))
    assert _address_allowed("192.168.4.5", networks)
    assert _address_allowed("::1", networks)
    assert not _address_allowed("127.0.0.2", networks)
    assert not _address_allowed("not-an-ip", networks)


def test_request_latency_is_labelled_by_route_name_and_status(client, metrics_open):
    before = scrape(client)
    client.get("/healthz")
    client.get("/no/such/page/12345")
    after = scrape(client)
    name = "cronsvc_http_request_duration_seconds_count"
    assert value(after, name, endpoint="healthz", status="200") == value(before, name, endpoint="healthz", status="200") + 1
    assert value(after, name, endpoint="unmatched", status="404") == value(before, name, endpoint="unmatched", status="404") + 1
    assert not [key for key in after if "12345" in str(key)]


def test_outcomes_count_only_once_committed(django_capture_on_commit_callbacks, client, metrics_open):
    now = timezone.now()
    outcomes = [
        RunOutcome(1, 1, 1, "succeeded", now, attempt_number=1, attempt_counted=True, duration_ms=120),
        RunOutcome(2, 1, 1, "queued", now, attempt_number=1, attempt_counted=True, error_kind="http_status", duration_ms=30),
        RunOutcome(3, 1, 1, "dead", now, attempt_number=3, attempt_counted=True, error_kind="timeout", duration_ms=5000),
        RunOutcome(4, 1, 1, "running", now, attempt_number=2, attempt_counted=True, moved=False, duration_ms=10),
    ]
    before = scrape(client)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        on_outcomes(outcomes)
    pending = scrape(client)  # nothing moves before the commit
    assert value(pending, "cronsvc_attempts_total") == value(before, "cronsvc_attempts_total")
    assert value(pending, "cronsvc_executions_total") == value(before, "cronsvc_executions_total")
    for callback in callbacks:
        callback()
    after = scrape(client)

    def delta(name, **labels):
        return value(after, name, **labels) - value(before, name, **labels)

    assert delta("cronsvc_executions_total", status="succeeded", error_kind="") == 1
    assert delta("cronsvc_executions_total", status="queued", error_kind="http_status") == 1
    assert delta("cronsvc_executions_total", status="dead", error_kind="timeout") == 1
    assert delta("cronsvc_executions_total", status="running") == 0  # a lost lease moves no run
    assert delta("cronsvc_attempts_total") == 4
    assert delta("cronsvc_retries_total") == 1
    assert delta("cronsvc_dead_executions_total") == 1
    assert delta("cronsvc_delivery_duration_seconds_count") == 4
    assert delta("cronsvc_delivery_duration_seconds_bucket", le="0.1") == 2


def test_circuit_breaker_states_are_read_at_scrape_time(client, metrics_open):
    client_redis = redis_client()
    keys = ["cronsvc:cb:obs-open.example:443", "cronsvc:cb:obs-half.example:443"]
    before = scrape(client)
    client_redis.hset(keys[0], mapping={"state": "open", "retry_at": "1"})
    client_redis.hset(keys[1], mapping={"state": "half_open", "probe_until": "1"})
    try:
        after = scrape(client)
    finally:
        client_redis.delete(*keys)
    assert value(after, "cronsvc_circuit_breakers", state="open") == value(before, "cronsvc_circuit_breakers", state="open") + 1
    assert value(after, "cronsvc_circuit_breakers", state="half_open") == value(
        before, "cronsvc_circuit_breakers", state="half_open") + 1


def test_queue_depth_counts_waiting_messages(client, metrics_open, tenant):
    from tests.support.broker import use_private_queue

    queue = use_private_queue(tenant)
    client_redis = redis_client()
    client_redis.rpush(queue, b"m1", b"m2", b"m3")
    try:
        samples = scrape(client)
    finally:
        client_redis.delete(queue)
    assert value(samples, "cronsvc_queue_depth", queue=queue) == 3
    assert ("cronsvc_queue_depth", (("queue", "default"),)) in samples


def test_embedded_broker_folder_depths(tmp_path):
    from apps.executions.scheduling.broker_queues import _folder_depths

    for name in ("1_a.runs.free.msg", "2_b.runs.free.msg", "3_c.default.msg", "junk.txt"):
        (tmp_path / name).write_text("x")
    assert _folder_depths(str(tmp_path), ["runs.free", "default", "runs.pro"]) == {
        "runs.free": 2, "default": 1, "runs.pro": 0}
