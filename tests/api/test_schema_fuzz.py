"""Schemathesis against our own OpenAPI schema, in process (WSGI app, the test database):
no generated request, valid or not, may cause a 5xx, a response that breaks the schema,
or an undocumented content type.

Operations are split by resource so pytest-xdist spreads them over workers; examples per
operation are bounded and derandomized so the run takes about a minute and is repeatable.
"""

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from apps.accounts.models import AuditEvent, DataExport, Membership, User
from apps.executions.models import Execution
from apps.monitors.services import create_monitor
from apps.accounts.apikeys import create_api_key
from apps.api.accounts import invitations
from tests.conftest import utc

CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]
RESOURCES = ["projects", "jobs", "schedules", "executions", "dead-letter", "api-keys", "members", "invitations",
             "audit-events", "organization", "workflow-runs", "monitors"]
# Resources whose fuzzing lives beside their own tests (each imports this module's fixtures).
FUZZED_ELSEWHERE = {
    "channels": "tests/notifications/test_schema_fuzz.py",
    "notifications": "tests/notifications/test_schema_fuzz.py",
    "event-subscriptions": "tests/notifications/test_schema_fuzz.py",
    "badges": "tests/analytics/test_fuzz.py",
    "stats": "tests/analytics/test_fuzz.py",
    "usage": "tests/billing/test_usage_fuzz.py",
    "archives": "tests/archives/test_archive_fuzz.py",
}
EXAMPLES = 8


@pytest.fixture
def world(make_tenant, make_job):
    """An enterprise tenant (its rate limit is out of the way) with one of everything."""
    tenant = make_tenant(plan="enterprise")
    job = make_job(tenant)
    dead = Execution.objects.create(job=job, organization=tenant.organization, status="dead",
                                    scheduled_for=utc(2027, 1, 1))
    spare_key, _ = create_api_key(tenant.organization, "spare")
    member = User.objects.create_user(email="fuzz-member@example.com")
    Membership.objects.create(user=member, organization=tenant.organization, role="developer")
    event = AuditEvent.objects.create(organization=tenant.organization, action="seed")
    invitation = invitations.invite(tenant.organization, email="fuzz-invitee@example.com", role="viewer",
                                    project_ids=None)
    export = DataExport.objects.create(organization=tenant.organization)
    monitor = create_monitor(project=tenant.project, name="backup", schedule_type="interval",
                             interval_seconds=3600, grace_seconds=600)
    ids = {"projects": tenant.project.pk, "jobs": job.pk, "executions": dead.pk, "dead-letter": dead.pk,
           "api-keys": spare_key.pk, "members": member.pk, "invitations": invitation.pk, "audit-events": event.pk,
           "organization": export.pk, "workflow-runs": dead.pk, "monitors": monitor.pk}
    return tenant, {name: str(pk) for name, pk in ids.items()}


@pytest.fixture
def wsgi_app():
    """The real WSGI app, minus closing the DB connection per request (as Django's test client
    does): the test's transaction lives on that connection."""
    for signal in (signals.request_started, signals.request_finished):
        signal.disconnect(close_old_connections)
    yield get_wsgi_application()
    for signal in (signals.request_started, signals.request_finished):
        signal.connect(close_old_connections)


@pytest.fixture
def api_schema(world, wsgi_app):
    return schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", wsgi_app)


def operations(api_schema, resource):
    prefix = f"/api/v1/{resource}/"
    return [op for op in (r.ok() for r in api_schema.get_all_operations()) if op.path.startswith(prefix)]


def fuzz(strategy, headers):
    @given(case=strategy)
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case):
        case.call_and_validate(headers=headers, checks=CHECKS)

    run()


def fuzz_resource(api_schema, resource, api_key, object_id):
    """Every operation under /api/v1/<resource>/, with valid and invalid input, and those
    with an {id} also on a real object (``object_id``), not only on random ids."""
    headers = {"Authorization": f"Bearer {api_key}"}
    found = operations(api_schema, resource)
    assert found, resource
    for operation in found:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            fuzz(operation.as_strategy(mode), headers)
        if "{id}" in operation.path:
            fuzz(operation.as_strategy(GenerationMode.POSITIVE, path_parameters={"id": object_id}), headers)


@pytest.mark.slow
@pytest.mark.parametrize("resource", RESOURCES)
def test_api_conforms_to_its_schema(api_schema, world, resource):
    tenant, ids = world
    fuzz_resource(api_schema, resource, tenant.full_api_key, ids.get(resource))


def test_every_operation_is_fuzzed(api_schema):
    from pathlib import Path

    every = {op.label for op in (r.ok() for r in api_schema.get_all_operations())}
    resources = RESOURCES + list(FUZZED_ELSEWHERE)
    covered = {op.label for resource in resources for op in operations(api_schema, resource)}
    assert every == covered
    root = Path(__file__).resolve().parents[2]
    for resource, module in FUZZED_ELSEWHERE.items():
        assert f'"{resource}"' in (root / module).read_text(), (resource, module)
