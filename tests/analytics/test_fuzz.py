"""Schemathesis on /api/v1/badges/ and /api/v1/stats/ (the job actions are fuzzed with the
jobs in tests/api/test_schema_fuzz.py): no 5xx, responses as documented."""

import pytest
from schemathesis import GenerationMode

from apps.badges.models import Badge
from tests.api.test_schema_fuzz import api_schema, fuzz, operations, world, wsgi_app  # noqa: F401 (fixtures)


@pytest.mark.slow
@pytest.mark.parametrize("resource", ["badges", "stats"])
def test_api_conforms_to_its_schema(api_schema, world, make_job, resource):  # noqa: F811
    tenant, _ = world
    badge = Badge.objects.create(organization=tenant.organization, job=make_job(tenant))
    headers = {"Authorization": f"Bearer {tenant.full_api_key}"}
    found = operations(api_schema, resource)
    assert found, resource
    for operation in found:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz(operation.as_strategy(mode), headers)
        if "{id}" in operation.path:
            fuzz(operation.as_strategy(GenerationMode.POSITIVE, path_parameters={"id": str(badge.pk)}), headers)
