"""A moto S3 server per test module (a real process; the loss test starts its own to kill),
a fresh bucket per test, and expired runs to purge."""

import itertools
from datetime import timedelta

import pytest

from apps.executions.models import Attempt, Execution
from tests.conftest import utc
from tests.api.conftest import member_client  # noqa: F401 - a fixture
from tests.support.s3 import MotoServer, archive_settings

NOW = utc(2030, 6, 30, 12, 0)
_buckets = itertools.count(1)


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    server = MotoServer(tmp_path_factory.mktemp("moto"))
    yield server
    server.stop()


@pytest.fixture
def bucket(moto, settings):
    name = f"archives-{next(_buckets)}"
    moto.create_bucket(name)
    archive_settings(settings, moto, name)
    return name


def expired_runs(job, *, days, per_day):
    """``per_day`` finished runs (one attempt each, a secret header as a receiver might echo
    it) on each of ``days`` days, all past the free plan's 7 days, oldest first."""
    runs = []
    for day in range(days, 0, -1):
        for n in range(per_day):
            when = NOW - timedelta(days=7 + day, hours=n)
            run = Execution.objects.create(
                job=job, organization=job.organization, scheduled_for=when, status=Execution.Status.SUCCEEDED,
                attempt=1, started_at=when, finished_at=when + timedelta(seconds=1), duration_ms=1000,
                response_status=200, response_headers={"Content-Type": "text/plain", "Set-Cookie": "session=s3cr3t"},
                response_body=f"ok {day}/{n}")
            Attempt.objects.create(execution=run, number=1, request_method="POST", request_url=job.url,
                                   request_headers={"Authorization": "Bearer s3cr3t", "X-Run": str(n)},
                                   started_at=when, outcome="succeeded", response_status=200)
            runs.append(run)
    return runs


@pytest.fixture
def archived(make_tenant, make_job, bucket):
    """A free-plan tenant whose two expired days were purged into the bucket."""
    from apps.billing.retention import purge_expired

    tenant = make_tenant(plan="free")
    runs = expired_runs(make_job(tenant), days=2, per_day=2)
    purge_expired(now=NOW)
    tenant.runs = runs
    return tenant
