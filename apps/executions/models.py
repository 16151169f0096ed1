from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.accounts.tenancy import TenantQuerySet
from apps.sql.loading import QuickLoad
from apps.sql.pgtypes import JSONField
from cronsvc import statuses
from cronsvc.ids import uuid7


class DeletedJob(models.Model):
    """A deleted job whose executions are being purged after it (apps.executions.purging):
    its history is hidden from its organization until they are gone."""

    job_id = models.UUIDField(primary_key=True)
    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="+")
    deleted_at = models.DateTimeField(default=timezone.now)

    def __str__(self):
        return f"{self.job_id} (deleted {self.deleted_at:%Y-%m-%d %H:%M})"


class ExecutionQuerySet(TenantQuerySet):
    tenant_path = "organization"

    def for_organization(self, organization):
        """The organization's executions but those of its deleted jobs still being purged."""
        gone = DeletedJob.objects.filter(organization=organization).values("job_id")
        return super().for_organization(organization).exclude(job_id__in=gone)

    def of_kept_jobs(self):
        """Every organization's executions but those of deleted jobs still being purged."""
        return self.exclude(job_id__in=DeletedJob.objects.values("job_id"))


class Execution(QuickLoad, models.Model):
    """One run of a job: a scheduled occurrence, a manual trigger, a retry or a replay."""

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule", "Schedule"
        MANUAL = "manual", "Manual"
        RETRY = "retry", "Retry"
        REPLAY = "replay", "Replay"
        DEPENDENCY = "dependency", "Upstream jobs"

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"
        TIMED_OUT = "timed_out", "Timed out"
        SKIPPED = "skipped", "Skipped"
        DEAD = "dead", "Dead"
        CANCELLED = "cancelled", "Cancelled"

    FINAL_STATUSES = statuses.FINAL  # named once, in cronsvc.statuses

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # No single-column indexes on job and organization: the unique occurrence and
    # exec_org_latest lead with them, and each index costs every status change of every
    # run (a large share of PostgreSQL's CPU: bench/README.md, "Figures behind the code").
    # No (job, -scheduled_for) index either: the unique (job, scheduled_for, trigger) one,
    # read backwards, serves a job's runs newest first (bench/README.md, issue 38).
    # No constraint in the database: deleting a job (apps.executions.purging) removes the job at
    # once and its executions in batches after it. Every other way a job goes (its project,
    # the admin) still deletes its executions with it (Django's cascade).
    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="executions", db_index=False,
                            db_constraint=False)
    # Denormalised so tenant-wide history needs no join through jobs.
    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="+",
                                     db_index=False)
    scheduled_for = models.DateTimeField()
    # The job's jitter applied to this run (a scheduled run is due this long after
    # ``scheduled_for``), kept per run: lateness is measured from the due time, so jitter
    # is never lateness, even after the job's jitter is edited (apps/executions/lateness.py).
    jitter_seconds = models.PositiveIntegerField(default=0, db_default=0)
    trigger = models.CharField(max_length=10, choices=Trigger.choices, default=Trigger.SCHEDULE)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    skip_reason = models.CharField(max_length=40, blank=True)
    attempt = models.PositiveSmallIntegerField(default=0)
    queue = models.CharField(max_length=80, blank=True)
    replay_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="replays",
                                  db_index=False)  # indexed below, only where set

    # Workflows: every execution of one chain carries the id of the chain's first execution
    # (set on that one when it finishes, if its job has downstream jobs); a run triggered
    # by its upstreams names the upstream executions that started it.
    workflow_run_id = models.UUIDField(null=True, blank=True)  # indexed below, only where set
    upstream_executions = JSONField(default=list, blank=True)
    # The job's version (Job.version, apps.jobs.versions) this run was made with; null for
    # runs made before jobs had versions.
    job_version = models.PositiveIntegerField(null=True, blank=True)

    created_at = models.DateTimeField(default=timezone.now)
    published_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # Fenced leases (docs/architecture.md, "Fenced leases"): every claim of the run (a
    # worker's queued -> running, a retry's claim, the sweeper's take-back) writes a new
    # ``lease_token``; the worker holding the run writes nothing for it unless the row still
    # carries its token. ``lease_expires_at`` is set by the claim and renewed by the holding
    # worker's heartbeat (LEASE_SECONDS, on the database's clock): past it, the worker is
    # presumed dead or stuck and the sweeper takes the run back. ``lease_reclaims`` counts
    # those take-backs: past LEASE_MAX_RECLAIMS the run fails (error_kind ``lease_lost``)
    # instead of being sent again.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    lease_token = models.BigIntegerField(default=0, db_default=0)
    lease_reclaims = models.PositiveSmallIntegerField(default=0, db_default=0)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_headers = JSONField(default=dict, blank=True)
    response_body = models.TextField(blank=True)
    remote_addr = models.CharField(max_length=64, blank=True)
    error_kind = models.CharField(max_length=30, blank=True)
    error_message = models.TextField(blank=True)
    # Run control (docs/run-control.md): why the run did not start at its occurrence
    # ("outside_window": moved to the window's next opening, which is scheduled_for;
    # "overload": held back while its plan's queue was overloaded) and, for a window,
    # the occurrence it was moved from. Database default: raw INSERTs omit it.
    defer_reason = models.CharField(max_length=20, blank=True, default="", db_default="")
    deferred_from = models.DateTimeField(null=True, blank=True)

    # Run control (apps.executions.cancelling): who stopped the run and when, as
    # {"kind": "user"|"api_key"|"operator", "id": ..., "name": ...}.
    cancelled_at = models.DateTimeField(null=True, blank=True)
    cancelled_by = JSONField(null=True, blank=True)

    objects = ExecutionQuerySet.as_manager()

    class Meta:
        ordering = ["-scheduled_for"]
        constraints = [
            # The heart of "nothing doubled": the database itself refuses a second row
            # for the same occurrence, whichever scheduler tries to insert it.
            models.UniqueConstraint(
                fields=["job", "scheduled_for", "trigger"], name="execution_unique_occurrence"
            ),
            # Fan-in exactly once: one dependency-triggered run per job and workflow run,
            # whichever upstream finishes it and on whichever worker.
            models.UniqueConstraint(
                fields=["job", "workflow_run_id"], name="execution_unique_workflow_step",
                condition=Q(trigger="dependency"),
            ),
        ]
        indexes = [
            models.Index(fields=["organization", "-scheduled_for"], name="exec_org_latest"),
            # Deleting an execution looks up its replays; few runs are replays.
            models.Index(fields=["replay_of"], name="exec_replay_of", condition=Q(replay_of__isnull=False)),
            # A workflow's runs (apps.workflows); scheduled runs, the most, belong to none.
            models.Index(fields=["workflow_run_id"], name="exec_workflow_run",
                         condition=Q(workflow_run_id__isnull=False)),
            # The sweeper's scan: only unfinished runs are in this index.
            models.Index(
                fields=["status", "published_at"],
                name="exec_unfinished",
                condition=Q(status__in=["queued", "running"]),
            ),
            models.Index(
                fields=["job"],
                name="exec_job_unfinished",
                condition=Q(status__in=["queued", "running"]),
            ),
        ]

    def __str__(self):
        return f"{self.job_id} @ {self.scheduled_for:%Y-%m-%d %H:%M:%S} ({self.status})"


class Attempt(models.Model):
    """One HTTP request made for an execution; retries add rows here.

    ``superseded_token``: 0 for the run's own attempt; for the request of a worker whose
    lease was taken back before it recorded (its token was no longer the run's), that
    worker's token. Such an attempt is history (the request went out, and it is metered)
    but no outcome: it changed nothing, and the run's own attempt of that number is the one
    its lease holder records. The run's own attempts are unique by number; a superseded one
    is unique by its token, which no other claim shares."""

    id = models.BigAutoField(primary_key=True)
    # attempt_unique_number (execution, number, superseded_token) serves the foreign key too.
    execution = models.ForeignKey(Execution, on_delete=models.CASCADE, related_name="attempts", db_index=False)
    number = models.PositiveSmallIntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    request_method = models.CharField(max_length=8)
    request_url = models.TextField()
    request_headers = JSONField(default=dict, blank=True)
    request_body = models.TextField(blank=True)
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_headers = JSONField(default=dict, blank=True)
    response_body = models.TextField(blank=True)
    remote_addr = models.CharField(max_length=64, blank=True)
    outcome = models.CharField(max_length=12)
    error_kind = models.CharField(max_length=30, blank=True)
    error_message = models.TextField(blank=True)
    superseded_token = models.BigIntegerField(default=0, db_default=0)

    class Meta:
        ordering = ["execution", "number"]
        constraints = [
            models.UniqueConstraint(fields=["execution", "number", "superseded_token"],
                                    name="attempt_unique_number"),
        ]

    @property
    def superseded(self):
        return self.superseded_token != 0

    def __str__(self):
        return f"attempt {self.number} of {self.execution_id}"


# --- usage counters and run statistics (apps.executions.usage): written with the runs,
# read by the quotas, billing's statements and the charts.


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
        db_table = "billing_usagemonth"  # the table it had in billing (executions 0011, billing 0007)
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
        db_table = "billing_usageday"  # the table it had in billing (executions 0011, billing 0007)
        ordering = ["-day"]
        constraints = [models.UniqueConstraint(fields=["organization", "day"], name="usage_day_unique")]

    def __str__(self):
        return f"{self.organization_id} {self.day}: {self.runs}"


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
        db_table = "billing_jobdaystats"  # the table it had in billing (executions 0011, billing 0007)
        ordering = ["-day"]
        constraints = [models.UniqueConstraint(fields=["job", "day"], name="job_day_stats_unique")]
        indexes = [models.Index(fields=["organization", "day"], name="job_day_stats_org_day")]

    def __str__(self):
        return f"{self.job_id} {self.day}"
