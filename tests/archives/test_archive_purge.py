"""Archive before purge, against a real moto S3 server: every expired run is in a gzip
JSON Lines part of its organization and day before it is deleted, a day purged in several
batches has several parts (none overwritten), secrets are masked, and when the object store
dies mid-way no run is lost and no archive is recorded for a failed write."""

import gzip
import hashlib
import json

import pytest

from apps.archives.models import Archive
from apps.billing.retention import purge_expired
from apps.executions.models import Execution
from cronsvc.archives import ObjectStore
from cronsvc.delivery.masking import MASK
from tests.support.s3 import MotoServer, archive_settings

from .conftest import NOW, expired_runs


def stored_lines(server, bucket, archive):
    body = server.client().get_object(Bucket=bucket, Key=archive.key)["Body"].read()
    assert hashlib.sha256(body).hexdigest() == archive.sha256 and len(body) == archive.bytes
    return [json.loads(line) for line in gzip.decompress(body).decode().splitlines()]


def test_purge_archives_each_day_in_parts_then_deletes_exactly_those_runs(make_tenant, make_job, moto, bucket):
    tenant = make_tenant(plan="free")  # 7 days
    job = make_job(tenant)
    runs = expired_runs(job, days=2, per_day=5)
    young = Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=NOW,
                                     status=Execution.Status.SUCCEEDED)

    report = purge_expired(now=NOW, batch_size=3)

    assert report.executions == 10 and report.archive_failures == 0
    assert list(Execution.objects.filter(job=job)) == [young]
    archives = list(Archive.objects.for_organization(tenant.organization).order_by("key"))
    # 5 runs a day in batches of 3: each day has more than one part, each its own object.
    assert len(archives) >= 4 and len({a.key for a in archives}) == len(archives)
    assert {a.day for a in archives} == {r.scheduled_for.date() for r in runs}
    assert all(a.key.startswith(f"executions/{tenant.organization.pk}/{a.day:%Y/%m/%d}-") for a in archives)
    lines = [(a, line) for a in archives for line in stored_lines(moto, bucket, a)]
    assert sorted(line["id"] for _, line in lines) == sorted(str(r.pk) for r in runs)
    assert sum(a.rows for a in archives) == 10
    by_id = {str(r.pk): r for r in runs}
    for archive, line in lines:
        run = by_id[line["id"]]
        assert line["scheduled_for"].startswith(run.scheduled_for.strftime("%Y-%m-%dT%H:%M:%S"))
        assert archive.day.isoformat() == line["scheduled_for"][:10]
        assert (line["job_id"], line["organization_id"]) == (str(job.pk), str(tenant.organization.pk))
        assert (line["status"], line["response_body"], line["duration_ms"]) == ("succeeded", run.response_body, 1000)
        assert line["response_headers"] == {"Content-Type": "text/plain", "Set-Cookie": MASK}
        [attempt] = line["attempts"]
        assert attempt["request_headers"] == {"Authorization": MASK, "X-Run": attempt["request_headers"]["X-Run"]}
        assert attempt["request_url"] == job.url and attempt["number"] == 1
    assert "s3cr3t" not in json.dumps([line for _, line in lines])


def test_archiving_off_without_a_bucket_purges_as_before(make_tenant, make_job, settings):
    settings.ARCHIVE_S3_BUCKET = ""
    tenant = make_tenant(plan="free")
    expired_runs(make_job(tenant), days=1, per_day=2)
    assert purge_expired(now=NOW).executions == 2
    assert not Archive.objects.exists()


def test_a_missing_bucket_keeps_every_run(make_tenant, make_job, moto, settings):
    archive_settings(settings, moto, "no-such-bucket")
    tenant = make_tenant(plan="free")
    runs = expired_runs(make_job(tenant), days=1, per_day=2)
    report = purge_expired(now=NOW)
    assert report.executions == 0 and report.archive_failures == 1
    assert Execution.objects.filter(pk__in=[r.pk for r in runs]).count() == 2
    assert not Archive.objects.exists()


@pytest.mark.slow
def test_object_store_killed_mid_purge_loses_no_run_and_records_no_failed_part(
        make_tenant, make_job, settings, tmp_path, monkeypatch):
    server = MotoServer(tmp_path)
    try:
        server.create_bucket("archives")
        archive_settings(settings, server, "archives")
        tenant = make_tenant(plan="free")
        runs = expired_runs(make_job(tenant), days=3, per_day=2)
        written = []
        real_write = ObjectStore.write

        def write_then_die(store, key, part):
            stored = real_write(store, key, part)
            written.append(stored.key)
            if len(written) == 1:
                server.kill()  # the first part is in; the store dies before the next
            return stored

        monkeypatch.setattr(ObjectStore, "write", write_then_die)
        report = purge_expired(now=NOW, batch_size=2)

        assert report.archive_failures == 1 and report.executions == 2
        [archive] = Archive.objects.all()
        assert archive.key == written[0] and archive.rows == 2
        left = set(Execution.objects.values_list("pk", flat=True))
        assert left == {r.pk for r in runs[2:]}  # only the confirmed part's runs are gone

        # The store is back (a new, empty one on the same port): the next purge archives the rest.
        server = MotoServer(tmp_path, port=server.port)
        server.create_bucket("archives")
        monkeypatch.setattr(ObjectStore, "write", real_write)
        report = purge_expired(now=NOW, batch_size=2)
        assert report.archive_failures == 0 and report.executions == 4
        assert not Execution.objects.exists()
        archives = Archive.objects.exclude(pk=archive.pk)
        assert sorted(line["id"] for a in archives for line in stored_lines(server, "archives", a)) == \
            sorted(str(r.pk) for r in runs[2:])
    finally:
        server.stop()
