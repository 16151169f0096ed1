import pytest


@pytest.fixture
def metrics_open(settings):
    """/metrics answers the test client (REMOTE_ADDR 127.0.0.1)."""
    settings.METRICS_TOKEN = ""
    settings.METRICS_ALLOWED_IPS = ["127.0.0.1/32"]
    return settings
