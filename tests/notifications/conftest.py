"""Notification fixtures: a local endpoint (the channel's and the subscriber's), loopback
allowed for it, and helpers to run a job's executions in-process (apps.executions.worker.batch)."""

import pytest
from django.utils import timezone


@pytest.fixture(autouse=True)
def allow_loopback(settings):
    settings.OUTBOUND_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.NOTIFICATION_RETRY_SECONDS = 30
    settings.NOTIFICATION_MAX_ATTEMPTS = 3


@pytest.fixture
def make_channel(db):
    from apps.notifications.models import Channel
    from apps.notifications.services import save_channel

    def make(tenant, kind="slack", project=None, **config):
        config = config or {"url": "http://127.0.0.1:1025/unused"}
        return save_channel(Channel(project=project or tenant.project), kind=kind, name=f"{kind} channel",
                            config=config)

    return make


def queued(job, **fields):
    from apps.executions.models import Execution

    values = dict(job=job, organization_id=job.organization_id, scheduled_for=timezone.now(), queue="q")
    values.update(fields)
    return Execution.objects.create(**values)


def run(*executions):
    """Run these executions as one worker batch, in this process."""
    from apps.executions.worker.batch import run_batch

    run_batch([e.id for e in executions])
    for execution in executions:
        execution.refresh_from_db()
    return executions
