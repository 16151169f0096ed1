"""The schema the API serves is a valid OpenAPI 3.0 document, as openapi-spec-validator (the
validator openapi-core and many generators run first) reads it."""

from openapi_spec_validator import OpenAPIV30SpecValidator


def test_the_served_schema_is_valid_openapi(api):
    schema = api.get("/api/v1/schema/?format=json").json()
    errors = [f"{'/'.join(map(str, error.absolute_path))}: {error.message[:300]}"
              for error in OpenAPIV30SpecValidator(schema).iter_errors()]
    assert errors == []


def test_nullable_references_are_written_so_strict_validators_accept_null(api):
    schema = api.get("/api/v1/schema/?format=json").json()
    script = schema["components"]["schemas"]["Job"]["properties"]["script"]
    assert script["oneOf"][0] == {"$ref": "#/components/schemas/ScriptSpec"}
    assert {"nullable": True, "enum": [None]}.items() <= script["oneOf"][1].items()

    def nullable_all_of(node):
        if isinstance(node, dict):
            return (node.get("nullable") and "allOf" in node) or any(map(nullable_all_of, node.values()))
        return isinstance(node, list) and any(map(nullable_all_of, node))

    assert not nullable_all_of(schema)


# Words of the code, not of the API: a description that says them was written for a maintainer.
CODE_WORDS = ("ViewSet", "get_object", "get_queryset", "serializer", "Mixed into", "mixin", "self.")


def test_every_operation_says_what_it_does_in_the_words_of_the_api(api):
    schema = api.get("/api/v1/schema/?format=json").json()
    found = {f"{method.upper()} {path}": operation.get("description", "")
             for path, operations in schema["paths"].items()
             for method, operation in operations.items() if method in ("get", "post", "put", "patch", "delete")}
    undescribed = sorted(name for name, text in found.items() if not text.strip())
    jargon = sorted(name for name, text in found.items() if any(word in text for word in CODE_WORDS))
    assert (undescribed, jargon) == ([], [])
