"""Sentry events carry no customer secret: captured through a test transport, the whole
envelope is searched for every secret the failing code held."""

import pytest
import sentry_sdk
from django.test import Client
from sentry_sdk.transport import Transport

from apps.observability import sentry

from .boom_urls import API_KEY, BEARER, BODY_SECRET, CUSTOM_TOKEN, PASSWORD, SECRETS, SESSION, SIGNING_SECRET


class CapturingTransport(Transport):
    def __init__(self, options=None):
        super().__init__(options)
        self.envelopes = []

    def capture_envelope(self, envelope):
        self.envelopes.append(envelope)

    def payload(self):
        return b"".join(envelope.serialize() for envelope in self.envelopes).decode("utf-8", "replace")


@pytest.fixture
def transport():
    transport = CapturingTransport()
    sentry.init("https://public@sentry.invalid/1", environment="test", traces_sample_rate=0.0, transport=transport)
    yield transport
    sentry_sdk.get_client().close()
    sentry_sdk.init()  # no DSN: disabled again for the other tests


def test_scrub_removes_secret_keys_bodies_and_prefixed_strings():
    event = {
        "request": {"headers": {"Authorization": "Bearer x", "X-Custom-Token": "t", "Accept": "json"},
                    "data": {"auth": "x"}, "cookies": {"sessionid": "s"}},
        "extra": {"nested": [{"signing_secrets": ["whsec_abc"]}, "see csk_live_abcdef", 3]},
        "event_id": "keep-me",
    }
    scrubbed = sentry.scrub(event)
    assert scrubbed["request"]["headers"] == {"Authorization": "[Filtered]", "X-Custom-Token": "[Filtered]",
                                              "Accept": "json"}
    assert scrubbed["request"]["data"] == "[Filtered]"
    assert scrubbed["request"]["cookies"] == "[Filtered]"
    assert scrubbed["extra"]["nested"] == [{"signing_secrets": "[Filtered]"}, "see [Filtered]", 3]
    assert scrubbed["event_id"] == "keep-me"


def test_scrub_removes_every_field_the_registry_of_secrets_declares():
    """Names that look like nothing secret (a script's environment, a channel's config) are
    declared in cronsvc.secrets, and filtered by that name; a request's own url stays."""
    event = {"extra": {"script_env": {"TOKEN": "env-value"}, "config": {"url": "https://hooks.example/T0/x"}},
             "request": {"url": "https://cronsvc.example/api/v1/jobs/"}}
    scrubbed = sentry.scrub(event)
    assert scrubbed["extra"] == {"script_env": "[Filtered]", "config": "[Filtered]"}
    assert scrubbed["request"]["url"] == "https://cronsvc.example/api/v1/jobs/"


def test_an_exception_with_secrets_in_its_frames_reaches_sentry_without_them(transport):
    def deliver(job_auth, signing_secrets):
        headers = {"Authorization": BEARER, "X-Custom-Token": CUSTOM_TOKEN}  # noqa: F841
        raise ValueError(f"could not sign with {signing_secrets[0]}")

    try:
        deliver({"type": "basic", "password": PASSWORD}, [SIGNING_SECRET])
    except ValueError:
        sentry_sdk.capture_exception()
    sentry_sdk.flush()
    payload = transport.payload()
    assert "could not sign with" in payload  # the event was sent
    assert "deliver" in payload  # with its frames
    for secret in SECRETS:
        assert secret not in payload


@pytest.mark.django_db
def test_a_failing_request_reaches_sentry_without_headers_body_or_secrets(transport, settings):
    settings.ROOT_URLCONF = "tests.observability.boom_urls"
    client = Client(raise_request_exception=False)
    response = client.post(
        "/boom", data='{"password": "%s"}' % BODY_SECRET, content_type="application/json",
        HTTP_AUTHORIZATION=BEARER, HTTP_COOKIE=SESSION, HTTP_X_API_KEY=API_KEY, HTTP_X_CUSTOM_TOKEN=CUSTOM_TOKEN,
    )
    assert response.status_code == 500
    sentry_sdk.flush()
    payload = transport.payload()
    assert "delivery exploded for" in payload
    assert "/boom" in payload
    for secret in SECRETS:
        assert secret not in payload
