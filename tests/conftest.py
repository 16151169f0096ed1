"""Shared fixtures: tenants (an owner, a teammate and an outsider by default), their API
clients, and jobs."""

import itertools
from datetime import datetime, timezone as dt_timezone

import pytest

UTC = dt_timezone.utc
_counter = itertools.count(1)


@pytest.fixture(autouse=True)
def _plain_static_storage(request):
    """In-process tests render pages without running collectstatic first. (The engine's
    tests also run without Django: `-p no:django`.)"""
    if not request.config.pluginmanager.has_plugin("django"):
        return
    settings = request.getfixturevalue("settings")
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }


@pytest.fixture(autouse=True)
def _api_answers_keep_the_contract(request, monkeypatch):
    """Every /api/v1/ answer a test's client receives is checked against the OpenAPI schema
    (tests/support/contract.py); ``@pytest.mark.off_contract`` opts a test out."""
    if not request.config.pluginmanager.has_plugin("django") or request.node.get_closest_marker("off_contract"):
        return
    from django.test.client import Client

    from tests.support.contract import check_response

    unchecked = Client.request

    def checked_request(self, **kwargs):
        response = unchecked(self, **kwargs)
        check_response(response.wsgi_request, response)
        return response

    monkeypatch.setattr(Client, "request", checked_request)


@pytest.fixture(autouse=True)
def _private_failed_key_counts(request, monkeypatch):
    """Every in-process test calls from 127.0.0.1: its failed API-key authentications are
    counted under a name of its own (not in the shared Redis counter the web processes of
    the end-to-end tests read) and not limited unless the test sets its own limit."""
    if not request.config.pluginmanager.has_plugin("django"):
        return
    import uuid

    from apps.api import authentication

    monkeypatch.setattr(authentication, "FAILURES", f"api-key-failures-test-{uuid.uuid4().hex}")
    request.getfixturevalue("settings").API_KEY_FAILURES_PER_IP = 1_000_000


@pytest.fixture(autouse=True)
def _fresh_ping_caches(request):
    """A test's pings start with no Target cached and no usage pending from an earlier test
    (apps.monitors.targets and apps.monitors.usage live as long as the process)."""
    if not request.config.pluginmanager.has_plugin("django"):
        return
    from apps.monitors import usage
    from apps.monitors.targets import targets

    targets.clear()
    usage.forget()


def ensure_seeded_plans():
    """Transactional tests flush the tables after each test, seeded plans included:
    seed them again the way the data migration does."""
    import importlib

    from apps.plans.models import Plan

    # The migrations' own values (they name Plan by the app it had then, billing).
    plans = importlib.import_module("apps.billing.migrations.0002_seed_plans").DEFAULT_PLANS
    limits = importlib.import_module("apps.billing.migrations.0005_monitor_limits").MONITOR_LIMITS
    for values in plans:
        Plan.objects.get_or_create(code=values["code"], defaults=values)
    for code, values in limits.items():
        Plan.objects.filter(code=code).update(**values)


@pytest.fixture
def make_tenant(db):
    from apps.projects.provisioning import provision_tenant

    def make(plan="pro", name=None, email=None):
        n = next(_counter)
        ensure_seeded_plans()
        return provision_tenant(
            org_name=name or f"Org {n:05d}", email=email or f"owner{n}@example.com", plan_code=plan
        )

    return make


@pytest.fixture
def tenant(make_tenant):
    return make_tenant()


@pytest.fixture
def other_tenant(make_tenant):
    return make_tenant()


@pytest.fixture
def api(tenant):
    """An API client with the tenant's own default (write) API key: acts as an admin."""
    from tests.api.conftest import key_client

    return key_client(tenant.full_api_key)


@pytest.fixture
def other_api(other_tenant):
    from tests.api.conftest import key_client

    return key_client(other_tenant.full_api_key)


@pytest.fixture
def make_job(db):
    from apps.jobs.models import Job

    def make(tenant, **fields):
        defaults = {
            "project": tenant.project,
            "organization": tenant.organization,
            "name": f"job {next(_counter)}",
            "schedule_type": Job.ScheduleType.CRON,
            "cron_expression": "*/5 * * * *",
            "url": "https://example.com/hook",
        }
        defaults.update(fields)
        return Job.objects.create(**defaults)

    return make


def utc(*args):
    return datetime(*args, tzinfo=UTC)


@pytest.fixture
def target():
    """A local HTTP endpoint (tests/support/target.py) for runs to reach."""
    from apps.executions.shared_redis import redis_client
    from cronsvc.delivery.breaker import host_key
    from tests.support.target import start_target

    server = start_target()
    # A port can come back in a later test: start with a closed circuit for it.
    redis_client().delete("cronsvc:cb:" + host_key(server.base_url))
    yield server
    server.close()


@pytest.fixture
def metrics_open(settings):
    """/metrics (and /readyz's details) answer the test client (REMOTE_ADDR 127.0.0.1)."""
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = ["127.0.0.1/32"]
    return settings


@pytest.fixture
def allow_loopback(settings):
    """The address guard refuses loopback by default; the tests' endpoints live there."""
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]


@pytest.fixture
def live_broker(request):
    """A real broker for end-to-end tests: Redis (the test settings' own) unless the test
    asks for RabbitMQ with ``@pytest.mark.parametrize("live_broker", [...], indirect=True)``.
    Its ``env`` goes to the platform's processes, the test process publishes to it too, and
    its ``private_queue(tenant)`` queues are dropped afterwards (tests/support/broker.py)."""
    from tests.support.broker import broker_under_test

    with broker_under_test(getattr(request, "param", "redis")) as broker:
        yield broker


@pytest.fixture
def live_database(request):
    """How an end-to-end test's platform processes reach PostgreSQL: directly (``env`` is
    empty), or with ``@pytest.mark.parametrize("live_database", ["pgbouncer"], indirect=True)``
    through a real PgBouncer in transaction pooling mode (tests/support/pgbouncer.py) with
    DATABASE_TRANSACTION_POOLING on. The test process itself always connects directly."""
    from types import SimpleNamespace

    if getattr(request, "param", "direct") == "direct":
        yield SimpleNamespace(env={}, pgbouncer=None)
        return
    from tests.support.pgbouncer import running_pgbouncer

    with running_pgbouncer() as pgbouncer:
        yield SimpleNamespace(env={"DATABASE_URL": pgbouncer.url(), "DATABASE_TRANSACTION_POOLING": "true"},
                              pgbouncer=pgbouncer)
