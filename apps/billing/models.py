from django.db import models


class Plan(models.Model):
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
    queue = models.CharField(max_length=60, help_text="Celery queue for this plan's runs.")
    monthly_price_cents = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["monthly_price_cents", "code"]

    def __str__(self):
        return self.name
