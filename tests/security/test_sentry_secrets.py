"""A worker crash while it holds a job's request (credentials, secret headers) reaches
Sentry without them: the objects in its frames are scrubbed as well as plain dicts."""

import pytest
import sentry_sdk

from apps.executions.worker.batch import request_spec
from apps.jobs.models import Job
from cronsvc.delivery.request import prepare
from tests.observability.test_sentry import transport  # noqa: F401 - the capturing Sentry

TOKEN, HEADER, MARKED = "sentry-bearer-4c1", "sentry-apikey-9d0", "sentry-marked-2b7"


@pytest.mark.django_db
def test_request_objects_in_frames_do_not_reach_sentry(transport, tenant, make_job):  # noqa: F811
    make_job(tenant, auth={"type": "bearer", "token": TOKEN},
             secret_headers={"X-Api-Key": HEADER, "X-Signature-Token": MARKED})
    job = Job.objects.get(organization=tenant.organization)

    def deliver(job):
        spec = request_spec(job)  # noqa: F841 - locals Sentry serialises
        prepared = prepare(spec, variables={}, job_id=job.id, execution_id=job.id, attempt=1,  # noqa: F841
                           scheduled_for=job.created_at, signing_secrets=[], timestamp=0, version="t")
        raise RuntimeError("endpoint exploded")

    try:
        deliver(job)
    except RuntimeError:
        sentry_sdk.capture_exception()
    sentry_sdk.flush()
    payload = transport.payload()
    assert "endpoint exploded" in payload and "deliver" in payload
    for secret in (TOKEN, HEADER, MARKED):
        assert secret not in payload
