"""Schemathesis on /api/v1/badges/ and /api/v1/stats/ (the job actions are fuzzed with the
jobs in tests/api/test_schema_fuzz.py): no 5xx, responses as documented."""

import pytest

from apps.badges.models import Badge
from tests.api.test_schema_fuzz import api_schema, fuzz_resource, world, wsgi_app  # noqa: F401 (fixtures)


@pytest.mark.slow
@pytest.mark.parametrize("resource", ["badges", "stats"])
def test_api_conforms_to_its_schema(api_schema, world, make_job, resource):  # noqa: F811
    tenant, _ = world
    badge = Badge.objects.create(organization=tenant.organization, job=make_job(tenant))
    fuzz_resource(api_schema, resource, tenant.full_api_key, str(badge.pk))
