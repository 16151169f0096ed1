"""The archive endpoints against their own OpenAPI schema (as tests/api/test_schema_fuzz.py
does for the other resources), with a real part in a moto bucket: no request may cause a
5xx or a response off the schema."""

from datetime import date

import pytest

from apps.archives.models import Archive
from apps.archives.writing import archive_store
from cronsvc.archives import encode_jsonl_gz
from tests.api.test_schema_fuzz import (api_schema, fuzz_resource, world,  # noqa: F401 (fixtures)
                                        wsgi_app)


@pytest.mark.slow
def test_archives_conform_to_their_schema(api_schema, world, bucket):  # noqa: F811
    tenant, _ids = world
    store = archive_store()
    part = encode_jsonl_gz([{"id": "seed", "status": "succeeded"}])
    stored = store.write(store.key(tenant.organization.pk, date(2027, 1, 1), "seed"), part)
    archive = Archive.objects.create(organization=tenant.organization, day=date(2027, 1, 1), key=stored.key,
                                     rows=part.rows, bytes=stored.bytes, sha256=stored.sha256)
    fuzz_resource(api_schema, "archives", tenant.full_api_key, str(archive.pk))
