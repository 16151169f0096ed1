from django.db import models

from apps.sql.loading import QuickLoad

# The plan a new organization starts on (billing's migration 0002 seeded the plans).
DEFAULT_PLAN_CODE = "free"


class Plan(QuickLoad, models.Model):
    """What a tenant may do, and which Celery queue its runs go to."""

    class OverQuota(models.TextChoices):
        BLOCK = "block", "Block runs past the quota"
        OVERAGE = "overage", "Bill overage per 1,000 runs"

    code = models.SlugField(max_length=40, unique=True)
    name = models.CharField(max_length=80)
    max_jobs = models.PositiveIntegerField()
    min_interval_seconds = models.PositiveIntegerField()
    max_timeout_seconds = models.PositiveIntegerField()
    max_attempts = models.PositiveIntegerField()
    retention_days = models.PositiveIntegerField()
    max_concurrency = models.PositiveIntegerField()
    monthly_executions = models.PositiveBigIntegerField()
    over_quota = models.CharField(max_length=10, choices=OverQuota.choices, default=OverQuota.BLOCK)
    overage_cents_per_1000 = models.PositiveIntegerField(default=0)
    api_requests_per_minute = models.PositiveIntegerField(default=60)
    auto_disable_after_failures = models.PositiveIntegerField(default=25)
    # Heartbeat monitors (apps.monitors): how many, and how many pings they may receive.
    max_monitors = models.PositiveIntegerField(default=5, db_default=5)
    monitor_pings_per_minute = models.PositiveIntegerField(default=60, db_default=60)
    monitor_pings_per_month = models.PositiveBigIntegerField(default=50_000, db_default=50_000)
    # Script jobs (cronsvc.sandbox.Limits, docs/script-jobs.md): per run of one script.
    script_wall_seconds = models.PositiveIntegerField(default=30, db_default=30)
    script_cpu_seconds = models.PositiveIntegerField(default=10, db_default=10)
    script_memory_mb = models.PositiveIntegerField(default=256, db_default=256)
    script_max_processes = models.PositiveIntegerField(default=32, db_default=32)
    script_output_kib = models.PositiveIntegerField(default=64, db_default=64, help_text="Each of stdout and stderr.")
    script_tmp_mb = models.PositiveIntegerField(default=16, db_default=16)
    queue = models.CharField(max_length=60, help_text="Celery queue for this plan's runs.")
    monthly_price_cents = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "billing_plan"  # the table it had in billing (migrations 0001 of plans and 0007 of billing)
        ordering = ["monthly_price_cents", "code"]

    def __str__(self):
        return self.name
