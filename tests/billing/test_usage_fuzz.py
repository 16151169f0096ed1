"""The usage endpoint against its own OpenAPI schema (as tests/api/test_schema_fuzz.py does
for the other resources): no request may cause a 5xx or a response off the schema."""

from schemathesis import GenerationMode

from tests.api.test_schema_fuzz import api_schema, fuzz, operations, world, wsgi_app  # noqa: F401 (fixtures)


def test_usage_conforms_to_its_schema(api_schema, world):  # noqa: F811
    tenant, _ids = world
    found = operations(api_schema, "usage")
    assert [op.method.upper() for op in found] == ["GET"]
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
        fuzz(found[0].as_strategy(mode), {"Authorization": f"Bearer {tenant.full_api_key}"})
