"""Schemathesis on the notification endpoints (as tests/api/test_schema_fuzz.py does for
the others): no generated request, valid or not, may cause a 5xx or break the schema."""

import pytest

from apps.notifications.models import Channel, EventSubscription, Notification
from apps.notifications.services import save_channel, save_subscription
from tests.api.test_schema_fuzz import fuzz_resource, wsgi_app  # noqa: F401  (a fixture and a helper)

RESOURCES = ["channels", "notifications", "event-subscriptions"]


@pytest.fixture
def world(make_tenant):
    tenant = make_tenant(plan="enterprise")
    channel = save_channel(Channel(project=tenant.project), kind="slack", name="ops",
                           config={"url": "http://127.0.0.1:1025/x"})
    subscription = save_subscription(EventSubscription(project=tenant.project), url="http://127.0.0.1:1025/e")
    row = Notification.objects.create(organization=tenant.organization, project=tenant.project, channel=channel,
                                      event="failure", subject="s", text="t")
    ids = {"channels": channel.pk, "notifications": row.pk, "event-subscriptions": subscription.pk}
    return tenant, {name: str(pk) for name, pk in ids.items()}


@pytest.fixture
def api_schema(world, wsgi_app):  # noqa: F811
    import schemathesis

    return schemathesis.openapi.from_wsgi("/api/v1/schema/?format=json", wsgi_app)


@pytest.mark.slow
@pytest.mark.parametrize("resource", RESOURCES)
def test_notification_api_conforms_to_its_schema(api_schema, world, resource):
    tenant, ids = world
    fuzz_resource(api_schema, resource, tenant.full_api_key, ids.get(resource))
