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
        ordering = ["monthly_price_cents", "code"]

    def __str__(self):
        return self.name


class UsageMonth(models.Model):
    """Attempts made by an organization in one calendar month (UTC): what quotas and
    statements read. Incremented by an upsert in the recording transaction, so a
    redelivered message never counts twice and concurrent workers never lose a count."""

    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="usage_months")
    month = models.DateField(help_text="First day of the month (UTC).")
    runs = models.PositiveBigIntegerField(default=0)
    # Heartbeat pings received (apps.monitors.pings), upserted by the ping's own statement.
    pings = models.PositiveBigIntegerField(default=0, db_default=0)
    # The plan's quota at the last increment: lets the increment itself tell whether a
    # warning threshold was crossed.
    quota = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-month"]
        constraints = [models.UniqueConstraint(fields=["organization", "month"], name="usage_month_unique")]

    def __str__(self):
        return f"{self.organization_id} {self.month:%Y-%m}: {self.runs}"


class UsageDay(models.Model):
    """Attempts per organization per UTC day, for the daily history (kept after the purge)."""

    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="usage_days")
    day = models.DateField()
    runs = models.PositiveBigIntegerField(default=0)
    succeeded = models.PositiveBigIntegerField(default=0)
    failed = models.PositiveBigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-day"]
        constraints = [models.UniqueConstraint(fields=["organization", "day"], name="usage_day_unique")]

    def __str__(self):
        return f"{self.organization_id} {self.day}: {self.runs}"


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


class JobDayStats(models.Model):
    """Daily roll-up of one job's runs, computed from executions by a housekeeping task so
    charts and usage survive the retention purge. Rows for days before yesterday are final."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="day_stats")
    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="+")
    day = models.DateField()
    runs = models.PositiveIntegerField(default=0)
    succeeded = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0, help_text="failed + timed_out + dead")
    skipped = models.PositiveIntegerField(default=0)
    attempts = models.PositiveIntegerField(default=0)
    duration_p50_ms = models.PositiveIntegerField(null=True, blank=True)
    duration_p95_ms = models.PositiveIntegerField(null=True, blank=True)
    duration_p99_ms = models.PositiveIntegerField(null=True, blank=True)
    lateness_p50_ms = models.IntegerField(null=True, blank=True)
    lateness_p95_ms = models.IntegerField(null=True, blank=True)
    lateness_p99_ms = models.IntegerField(null=True, blank=True)
    error_kinds = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-day"]
        constraints = [models.UniqueConstraint(fields=["job", "day"], name="job_day_stats_unique")]
        indexes = [models.Index(fields=["organization", "day"], name="job_day_stats_org_day")]

    def __str__(self):
        return f"{self.job_id} {self.day}"
