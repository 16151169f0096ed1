"""Analytics fixtures: runs at exact times with known durations and lateness."""

from datetime import timedelta

import pytest

from apps.executions.models import Attempt, Execution
from tests.api.conftest import make_key  # noqa: F401  (a fixture)

S = Execution.Status


@pytest.fixture
def make_run(db):
    """A finished run of ``job`` scheduled ``at``, whose first attempt started ``late_ms`` after it."""

    def make(job, at, status=S.SUCCEEDED, duration_ms=100, late_ms=0, error_kind=""):
        execution = Execution.objects.create(
            job=job, organization_id=job.organization_id, scheduled_for=at, status=status,
            duration_ms=None if status == S.SKIPPED else duration_ms, error_kind=error_kind,
            attempt=0 if status == S.SKIPPED else 1)
        if status not in (S.SKIPPED, S.QUEUED):
            started = at + timedelta(milliseconds=late_ms)
            Attempt.objects.create(execution=execution, number=1, started_at=started, request_method="GET",
                                   request_url="https://example.com/hook", outcome=status,
                                   finished_at=started + timedelta(milliseconds=duration_ms or 0),
                                   duration_ms=duration_ms, error_kind=error_kind)
        return execution

    return make
