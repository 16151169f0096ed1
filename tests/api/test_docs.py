"""The OpenAPI schema and the interactive docs are served, and describe every endpoint."""

import yaml
from rest_framework.test import APIClient

PATHS = {
    "/api/v1/projects/", "/api/v1/projects/{id}/", "/api/v1/jobs/", "/api/v1/jobs/{id}/",
    "/api/v1/jobs/{id}/pause/", "/api/v1/jobs/{id}/resume/", "/api/v1/jobs/{id}/trigger/",
    "/api/v1/jobs/{id}/next-runs/", "/api/v1/jobs/{id}/executions/", "/api/v1/jobs/import-crontab/",
    "/api/v1/schedules/preview/", "/api/v1/executions/", "/api/v1/executions/{id}/",
    "/api/v1/executions/{id}/replay/", "/api/v1/dead-letter/", "/api/v1/dead-letter/{id}/",
    "/api/v1/dead-letter/replay/", "/api/v1/api-keys/", "/api/v1/api-keys/{id}/", "/api/v1/api-keys/{id}/revoke/",
    "/api/v1/members/", "/api/v1/members/{id}/", "/api/v1/invitations/", "/api/v1/invitations/{id}/",
    "/api/v1/invitations/{id}/resend/", "/api/v1/invitations/{id}/revoke/", "/api/v1/audit-events/", "/api/v1/audit-events/{id}/",
    "/api/v1/organization/exports/", "/api/v1/organization/exports/{id}/",
    "/api/v1/organization/exports/{id}/download/", "/api/v1/organization/deletion/",
    "/api/v1/jobs/{id}/stats/", "/api/v1/jobs/{id}/badge/", "/api/v1/jobs/{id}/notification-rule/",
    "/api/v1/projects/{id}/notification-rule/", "/api/v1/projects/{id}/executions/", "/api/v1/stats/",
    "/api/v1/usage/",
    "/api/v1/badges/", "/api/v1/badges/{id}/", "/api/v1/channels/", "/api/v1/channels/{id}/",
    "/api/v1/channels/{id}/test/", "/api/v1/event-subscriptions/", "/api/v1/event-subscriptions/{id}/",
    "/api/v1/notifications/", "/api/v1/notifications/{id}/", "/api/v1/workflow-runs/{id}/",
    "/api/v1/archives/", "/api/v1/archives/{id}/", "/api/v1/archives/{id}/download/",
    "/api/v1/executions/{id}/cancel/", "/api/v1/jobs/{id}/versions/", "/api/v1/jobs/{id}/versions/{number}/",
    "/api/v1/jobs/{id}/versions/{number}/rollback/",
    "/api/v1/monitors/", "/api/v1/monitors/{id}/", "/api/v1/monitors/{id}/pause/", "/api/v1/monitors/{id}/resume/",
    "/api/v1/monitors/{id}/pings/", "/api/v1/monitors/{id}/badge/",
}


def test_schema_lists_every_endpoint_with_errors_and_auth(db):
    response = APIClient().get("/api/v1/schema/")
    assert response.status_code == 200
    schema = yaml.safe_load(response.content)
    assert set(schema["paths"]) == PATHS
    scheme = schema["components"]["securitySchemes"]["apiKey"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    assert "plan_limit" in schema["components"]["schemas"]["Error"]["properties"]["error"]["properties"]["code"][
        "description"]
    create = schema["paths"]["/api/v1/jobs/"]["post"]
    assert {"201", "400", "401", "402", "403", "429"} <= set(create["responses"])
    assert "X-RateLimit-Remaining" in create["responses"]["201"]["headers"]
    assert "Idempotency-Key" in [p["name"] for p in create["parameters"]]


def test_docs_page(db):
    assert APIClient().get("/api/docs/").status_code == 200


def test_path_ids_are_typed_as_the_resources_keys(db):
    # A custom action's queryset may be another model's (a monitor's pings): the path's id
    # is still the monitor's UUID, and clients generated from the schema must send one.
    schema = yaml.safe_load(APIClient().get("/api/v1/schema/").content)
    ids = {(path, parameter["schema"].get("format", parameter["schema"]["type"]))
           for path, operations in schema["paths"].items() if path.startswith("/api/v1/monitors/{id}/")
           for operation in operations.values() if isinstance(operation, dict)
           for parameter in operation.get("parameters", []) if parameter["in"] == "path"}
    assert {kind for _, kind in ids} == {"uuid"}, sorted(ids)
