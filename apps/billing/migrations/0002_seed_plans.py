from django.db import migrations

# The plans every install starts with, frozen here as they were at this migration:
# operators edit them in the admin afterwards, and later migrations change them.
DEFAULT_PLANS = [
    {
        "code": "free", "name": "Free", "max_jobs": 5, "min_interval_seconds": 3600,
        "max_timeout_seconds": 30, "max_attempts": 3, "retention_days": 7,
        "max_concurrency": 2, "monthly_executions": 5_000, "over_quota": "block",
        "overage_cents_per_1000": 0, "api_requests_per_minute": 60,
        "auto_disable_after_failures": 25, "queue": "runs.free", "monthly_price_cents": 0,
    },
    {
        "code": "pro", "name": "Pro", "max_jobs": 100, "min_interval_seconds": 60,
        "max_timeout_seconds": 60, "max_attempts": 5, "retention_days": 30,
        "max_concurrency": 10, "monthly_executions": 500_000, "over_quota": "overage",
        "overage_cents_per_1000": 50, "api_requests_per_minute": 600,
        "auto_disable_after_failures": 25, "queue": "runs.pro", "monthly_price_cents": 1_900,
    },
    {
        "code": "business", "name": "Business", "max_jobs": 1_000, "min_interval_seconds": 30,
        "max_timeout_seconds": 120, "max_attempts": 10, "retention_days": 90,
        "max_concurrency": 50, "monthly_executions": 5_000_000, "over_quota": "overage",
        "overage_cents_per_1000": 30, "api_requests_per_minute": 1_200,
        "auto_disable_after_failures": 50, "queue": "runs.business",
        "monthly_price_cents": 9_900,
    },
    {
        "code": "enterprise", "name": "Enterprise", "max_jobs": 1_000_000,
        "min_interval_seconds": 10, "max_timeout_seconds": 300, "max_attempts": 20,
        "retention_days": 365, "max_concurrency": 500, "monthly_executions": 100_000_000,
        "over_quota": "overage", "overage_cents_per_1000": 10,
        "api_requests_per_minute": 6_000, "auto_disable_after_failures": 100,
        "queue": "runs.enterprise", "monthly_price_cents": 49_900,
    },
]


def seed_plans(apps, schema_editor):
    Plan = apps.get_model("billing", "Plan")
    for values in DEFAULT_PLANS:
        Plan.objects.get_or_create(code=values["code"], defaults=values)


class Migration(migrations.Migration):
    dependencies = [("billing", "0001_initial")]
    operations = [migrations.RunPython(seed_plans, migrations.RunPython.noop)]
