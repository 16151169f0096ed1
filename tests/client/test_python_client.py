"""The importable client (cronsvc_client.Client) against the real web process: typed models,
lazy pages, and ApiError carrying the API's code."""

from datetime import datetime

import pytest

from apps.jobs.models import Job
from cronsvc_client import ApiError, Client, Execution, Job as ClientJob

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_models_are_typed_and_keep_the_whole_object(web, client_tenant, make_job):
    made = [make_job(client_tenant, name=f"typed {n}") for n in range(3)]
    client = Client(web.base_url, client_tenant.full_api_key)

    jobs = list(client.list_jobs(page_size=1))

    assert [job.id for job in jobs] == [str(job.pk) for job in made]
    assert all(isinstance(job, ClientJob) for job in jobs)
    first = jobs[0]
    assert isinstance(first.created_at, datetime) and first.created_at.tzinfo is not None
    assert first.schedule == {"type": "cron", "expression": "*/5 * * * *", "timezone": "UTC"}
    assert first.raw["misfire_policy"]  # fields the model does not name are kept in raw
    run = client.trigger_job(first.id)
    assert isinstance(run, Execution) and run.status == "queued" and not run.finished


def test_errors_carry_the_status_code_message_and_fields(web, client_tenant):
    client = Client(web.base_url, client_tenant.full_api_key)
    with pytest.raises(ApiError) as refused:
        client.create_job({"name": "x", "schedule": {"type": "interval", "seconds": 0},
                           "request": {"url": "https://example.com/"}})
    assert refused.value.status == 400 and refused.value.exit_code == 1
    assert refused.value.code and "schedule.seconds" in refused.value.fields
    with pytest.raises(ApiError) as missing:
        client.get_job("01a23bf1-0000-7000-8000-000000000000")
    assert (missing.value.status, missing.value.code, missing.value.exit_code) == (404, "not_found", 4)


def test_the_same_idempotency_key_creates_one_job(cli):
    args = ["jobs", "create", "--name", "once", "--every", "3600", "--url", "https://example.com/",
            "--idempotency-key", "deploy-42", "-o", "json"]
    first, again = cli.ok(*args), cli.ok(*args)
    assert first["id"] == again["id"] and Job.objects.count() == 1
