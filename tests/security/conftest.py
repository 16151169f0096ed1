"""Security tests reuse the API suite's clients (session and API-key) and job bodies."""

from tests.api.conftest import (  # noqa: F401 - fixtures
    _private_ip_quota,
    _public_targets_only,
    make_key,
    member_client,
)
