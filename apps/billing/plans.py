"""Plan facts the code relies on. The plans themselves are seeded by migration 0002."""

from apps.accounts.models import DEFAULT_PLAN_CODE  # noqa: F401 (accounts creates organizations on it)
PLAN_CODES = ("free", "pro", "business", "enterprise")
