from django.db import models

from apps.plans.models import Plan


class QuotaWarning(models.Model):
    """A quota threshold crossed in a month: the unique row is what makes the warning go
    out once per threshold per month, whichever worker crosses it."""

    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="quota_warnings")
    month = models.DateField()
    threshold = models.PositiveSmallIntegerField(help_text="Percent of the monthly quota.")
    runs = models.PositiveBigIntegerField()
    quota = models.PositiveBigIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-month", "threshold"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "month", "threshold"], name="quota_warning_unique")
        ]

    def __str__(self):
        return f"{self.organization_id} {self.month:%Y-%m} {self.threshold}%"


class Statement(models.Model):
    """What an organization owes for one month: what a payment integration consumes."""

    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="statements")
    period = models.DateField(help_text="First day of the month billed (UTC).")
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="+")
    plan_code = models.CharField(max_length=40)
    plan_name = models.CharField(max_length=80)
    runs = models.PositiveBigIntegerField()
    quota = models.PositiveBigIntegerField()
    overage_runs = models.PositiveBigIntegerField(default=0)
    base_cents = models.PositiveIntegerField()
    overage_cents = models.PositiveIntegerField(default=0)
    total_cents = models.PositiveIntegerField()
    currency = models.CharField(max_length=3, default="USD")
    lines = models.JSONField(default=list, blank=True)
    provider_reference = models.CharField(max_length=120, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-period"]
        constraints = [models.UniqueConstraint(fields=["organization", "period"], name="statement_unique_period")]

    def __str__(self):
        return f"{self.organization_id} {self.period:%Y-%m}: {self.total_cents}"
