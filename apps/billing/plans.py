"""Plan facts the code relies on. The plans themselves are seeded by migration 0002."""

DEFAULT_PLAN_CODE = "free"
PLAN_CODES = ("free", "pro", "business", "enterprise")
