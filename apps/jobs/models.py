from django.db import models, transaction
from django.db.models import F, Q
from django.utils.timezone import now

from apps.accounts.encryption import EncryptedJSONField
from apps.sql.loading import QuickLoad
from apps.sql.pgtypes import JSONField
from apps.accounts.tenancy import TenantQuerySet, tenant_manager
from cronsvc.delivery.masking import SECRET_HEADER_NAMES
from cronsvc.ids import uuid7

# Headers whose values are credentials (SECRET_HEADER_NAMES) are stored encrypted
# (Job.secret_headers) and never shown back. A customer may mark any other header secret too.

#: What ``Job.next_run_at`` reads as an annotation (``JobQuerySet.with_due``).
DUE_AT = "due_at"
_UNSET = object()


class JobQuerySet(TenantQuerySet):
    def with_due(self):
        """The jobs with their due time read in the same query (``due_at``: no query a job),
        also orderable as ``next_run_at``."""
        return self.annotate(**{DUE_AT: F("due__next_run_at")}).alias(next_run_at=F("due__next_run_at"))

    def bulk_create(self, objs, *args, **kwargs):
        # ``Job(next_run_at=...)`` keeps its due time in the narrow table, which a plain bulk
        # insert of the jobs would leave out.
        from .queries import write_dues  # the queries module reads the models

        created = super().bulk_create(objs, *args, **kwargs)
        due = [(job.pk, job.__dict__.pop("_next_run_at", None)) for job in created]
        write_dues([(job_id, at) for job_id, at in due if at is not None], self.db)
        return created


class Job(QuickLoad, models.Model):
    """An HTTP request on a schedule, with its retry policy and its running state."""

    class ScheduleType(models.TextChoices):
        CRON = "cron", "Cron expression"
        INTERVAL = "interval", "Every N seconds"
        ONCE = "once", "Once"
        # A job started only by its upstream jobs (workflows): it never has a next_run_at.
        NONE = "none", "Only when its upstream jobs trigger it"

    class Kind(models.TextChoices):
        HTTP = "http"
        SCRIPT = "script"

    class ScriptLanguage(models.TextChoices):
        PYTHON = "python"
        SHELL = "shell"

    class DependencyMode(models.TextChoices):
        ALL = "all", "When all upstream jobs reached their outcome"
        ANY = "any", "When any upstream job reached its outcome"

    class Method(models.TextChoices):
        GET = "GET"
        POST = "POST"
        PUT = "PUT"
        PATCH = "PATCH"
        DELETE = "DELETE"
        HEAD = "HEAD"

    class BodyFormat(models.TextChoices):
        RAW = "raw", "Raw text"
        JSON = "json", "JSON"
        FORM = "form", "Form-encoded"

    class MisfirePolicy(models.TextChoices):
        RUN_ONCE = "run_once", "Run once now, skip the rest"
        RUN_ALL = "run_all", "Run every missed occurrence"
        SKIP = "skip", "Skip missed occurrences"

    class OverlapPolicy(models.TextChoices):
        ALLOW = "allow", "Allow overlapping runs"
        FORBID = "forbid", "Skip while the previous run is still running"

    class OutsideWindow(models.TextChoices):
        SKIP = "skip", "Skip occurrences outside the windows"
        DEFER = "defer", "Defer them to the next window opening"

    class Priority(models.TextChoices):
        HIGH = "high", "High"
        NORMAL = "normal", "Normal"
        LOW = "low", "Low (deferred while the plan's queue is overloaded)"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    # No single-column indexes on project and organization: job_project_name and
    # job_org_name lead with them.
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="jobs", db_index=False)
    # Denormalised from the project so tenant-wide queries and the scheduler need no join.
    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="jobs",
                                     db_index=False)
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    tags = JSONField(default=list, blank=True)
    enabled = models.BooleanField(default=True)
    paused_reason = models.CharField(max_length=200, blank=True)

    # Schedule
    schedule_type = models.CharField(max_length=10, choices=ScheduleType.choices, default=ScheduleType.CRON)
    cron_expression = models.CharField(max_length=200, blank=True)
    interval_seconds = models.PositiveIntegerField(null=True, blank=True)
    run_at = models.DateTimeField(null=True, blank=True, help_text="For one-off jobs.")
    timezone = models.CharField(max_length=64, default="UTC")
    start_at = models.DateTimeField(null=True, blank=True)
    end_at = models.DateTimeField(null=True, blank=True)
    jitter_seconds = models.PositiveIntegerField(default=0)

    # Workflows: how this job's upstream dependencies (JobDependency) combine.
    dependency_mode = models.CharField(max_length=3, choices=DependencyMode.choices, default=DependencyMode.ALL)

    # What a run does: send the request below (http) or run script_source in the sandbox
    # (script, cronsvc.sandbox; docs/script-jobs.md).
    kind = models.CharField(max_length=6, choices=Kind.choices, default=Kind.HTTP, db_default=Kind.HTTP)
    script_language = models.CharField(max_length=6, choices=ScriptLanguage.choices, blank=True, default="",
                                       db_default="")
    script_source = models.TextField(blank=True, default="", db_default="")
    script_env = EncryptedJSONField(null=True, blank=True,
                                    help_text="The script's environment variables (encrypted; values never shown back).")
    script_allow_network = models.BooleanField(
        default=False, db_default=False,
        help_text="The script may make outbound HTTP(S) requests through the platform's egress proxy, "
                  "which applies the outbound address guard.")

    # Request
    url = models.URLField(max_length=2048, blank=True)
    method = models.CharField(max_length=8, choices=Method.choices, default=Method.GET)
    headers = JSONField(default=dict, blank=True)
    body = models.TextField(blank=True)
    body_format = models.CharField(max_length=8, choices=BodyFormat.choices, default=BodyFormat.RAW)
    auth = EncryptedJSONField(null=True, blank=True, help_text="Basic or bearer credentials (encrypted).")
    secret_headers = EncryptedJSONField(
        null=True, blank=True,
        help_text="Credential headers (Authorization, X-API-Key, Cookie, ... and those marked secret), encrypted; "
                  "merged into headers when the request is sent.")
    timeout_seconds = models.PositiveIntegerField(default=30)
    # Seconds to connect to the endpoint; empty: the platform's DELIVERY_CONNECT_TIMEOUT
    # (apps.jobs.validation.request_spec, the one place a run's request is specified).
    connect_timeout_seconds = models.FloatField(null=True, blank=True)
    follow_redirects = models.BooleanField(default=False)
    success_status_codes = models.CharField(max_length=200, default="200-299")
    success_body_contains = models.CharField(max_length=500, blank=True)
    success_body_regex = models.CharField(max_length=500, blank=True)

    # Retry policy (bounded by the plan)
    max_attempts = models.PositiveSmallIntegerField(default=3)
    retry_initial_delay_seconds = models.PositiveIntegerField(default=10)
    retry_max_delay_seconds = models.PositiveIntegerField(default=3600)
    retry_multiplier = models.FloatField(default=2.0)
    retry_on_timeout = models.BooleanField(default=False)

    misfire_policy = models.CharField(max_length=10, choices=MisfirePolicy.choices, default=MisfirePolicy.RUN_ONCE)
    misfire_grace_seconds = models.PositiveIntegerField(default=3600)
    overlap_policy = models.CharField(max_length=10, choices=OverlapPolicy.choices, default=OverlapPolicy.ALLOW)
    region = models.CharField(max_length=40, blank=True)
    rate_limit_per_minute = models.PositiveIntegerField(
        null=True, blank=True, help_text="At most this many requests a minute (token bucket); empty: no limit."
    )
    # Run control (docs/run-control.md). Windows and blackouts are in the job's timezone,
    # in the API's shape (cronsvc.schedules.window_parse); [] means none. Database
    # defaults: hand-written INSERTs elsewhere omit these columns.
    windows = JSONField(default=list, db_default=[], blank=True)
    blackouts = JSONField(default=list, db_default=[], blank=True)
    outside_window = models.CharField(max_length=5, choices=OutsideWindow.choices, default=OutsideWindow.SKIP,
                                      db_default=OutsideWindow.SKIP)
    priority = models.CharField(max_length=6, choices=Priority.choices, default=Priority.NORMAL,
                                db_default=Priority.NORMAL)

    # Running state. The due time (``next_run_at``) lives in JobDue, a narrow row of its own.
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(max_length=12, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    expired_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=200, blank=True)
    # The number of the job's current JobVersion (apps.jobs.versions); the scheduler copies
    # it onto each execution it inserts. A database default: hand-written INSERTs omit it.
    version = models.PositiveIntegerField(default=1, db_default=1, editable=False)
    created_at = models.DateTimeField(default=now)
    updated_at = models.DateTimeField(auto_now=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        indexes = [
            models.Index(fields=["project", "name"], name="job_project_name"),
            models.Index(fields=["organization", "name"], name="job_org_name"),
        ]

    def __str__(self):
        return self.name

    @property
    def next_run_at(self):
        """When the scheduler next claims the job (JobDue), None while it is paused or has no
        schedule. Set, it is written by the next ``save()``."""
        value = self.__dict__.get("_next_run_at", _UNSET)
        if value is _UNSET:
            value = self.__dict__.get(DUE_AT, _UNSET)
        if value is _UNSET:
            value = None
            if not self._state.adding:
                value = JobDue.objects.using(self._state.db).filter(job_id=self.pk).values_list(
                    "next_run_at", flat=True).first()
            self.__dict__[DUE_AT] = value
        return value

    @next_run_at.setter
    def next_run_at(self, value):
        self.__dict__["_next_run_at"] = value

    def save(self, *args, update_fields=None, **kwargs):
        # Every save moves updated_at, also one limited to some fields: the workers keep
        # the jobs they send for and reload one when its (version, updated_at) moved
        # (apps/executions/worker/jobcache.py). Django's auto_now writes only the fields named.
        writes_due = "_next_run_at" in self.__dict__
        if update_fields is not None:
            # not named: a due time set stays unsaved, as a field would
            writes_due = writes_due and "next_run_at" in update_fields
            update_fields = {*update_fields, "updated_at"} - {"next_run_at"}
        if not writes_due:
            super().save(*args, update_fields=update_fields, **kwargs)
            return
        with transaction.atomic(using=kwargs.get("using") or self._state.db or "default"):
            super().save(*args, update_fields=update_fields, **kwargs)
            self.write_due()

    def loaded_due(self, value):
        """Take ``value`` as the due time stored (read beside the job, or known after a write
        elsewhere): no query when read, nothing to write."""
        self.__dict__.pop("_next_run_at", None)
        self.__dict__[DUE_AT] = value

    def write_due(self):
        """Write the due time set since the job was loaded or saved, if one was (None while the
        job is disabled: its row says, not this copy), in the caller's transaction: ``save()``
        does, and so must any other way of storing it."""
        from .queries import write_due  # the queries module reads the models

        due = self.__dict__.pop("_next_run_at", _UNSET)
        if due is not _UNSET:
            self.__dict__[DUE_AT] = due if write_due(self.pk, due, self._state.db or "default") else None

    def refresh_from_db(self, using=None, fields=None, **kwargs):
        wants_due = fields is None or "next_run_at" in fields
        if fields is not None:
            fields = [name for name in fields if name != "next_run_at"]
        if wants_due:
            self.__dict__.pop("_next_run_at", None)
            self.__dict__.pop(DUE_AT, None)
        if fields is None or fields:
            super().refresh_from_db(using=using, fields=fields, **kwargs)

    def request_headers(self):
        """Every header the request carries: the plain ones and the decrypted secret ones."""
        return {**(self.headers or {}), **(self.secret_headers or {})}

    def secret_header_names(self):
        """Lower-cased names whose values must be masked wherever a request copy is shown."""
        return SECRET_HEADER_NAMES | {name.lower() for name in (self.secret_headers or {})}


class JobDue(models.Model):
    """A job's due time, in a row of its own: the scheduler claims and advances these narrow
    rows (the job's row stays as it is), so an advance writes ~40 bytes and two index
    entries instead of the job's whole row and each of its indexes (bench/README.md, "The
    narrow schedule table"). A paused job has no due time: a trigger clears it when the job
    is disabled, whatever disabled it (apps.jobs.queries, "the triggers")."""

    job = models.OneToOneField(Job, primary_key=True, on_delete=models.CASCADE, related_name="due")
    next_run_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # The scheduler's "what is due?" question, oldest due first.
            models.Index(fields=["next_run_at"], name="jobdue_due", condition=Q(next_run_at__isnull=False)),
        ]

    def __str__(self):
        return f"{self.job_id} due {self.next_run_at}"


class JobVersion(models.Model):
    """A job's definition as one change left it (apps.jobs.versions): who, when, how, the
    fields it changed, and a snapshot to roll back to. Secrets stay encrypted (``secrets``)
    and appear masked in ``snapshot`` and ``changes``."""

    class Source(models.TextChoices):
        API = "api", "API"
        PAGE = "page", "Web page"
        ADMIN = "admin", "Admin"
        IMPORT = "import", "Crontab import"
        ROLLBACK = "rollback", "Rollback"
        INITIAL = "initial", "Before versions were kept"

    id = models.BigAutoField(primary_key=True)
    # jobversion_unique_number (job, number) serves the foreign key too.
    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="versions", db_index=False)
    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="+",
                                     db_index=False)
    number = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=now)
    source = models.CharField(max_length=10, choices=Source.choices)
    actor_user = models.ForeignKey("accounts.User", null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    actor_api_key = models.ForeignKey("accounts.ApiKey", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="+")
    rollback_of = models.PositiveIntegerField(null=True, blank=True, help_text="The version rolled back to.")
    snapshot = models.JSONField(default=dict)
    changes = models.JSONField(default=dict, blank=True, help_text="{field: {from, to}}, secrets masked.")
    secrets = EncryptedJSONField(null=True, blank=True, help_text="This version's secret fields (cronsvc.secrets), for a rollback.")

    objects = tenant_manager("organization")

    class Meta:
        ordering = ["job", "-number"]
        constraints = [models.UniqueConstraint(fields=["job", "number"], name="jobversion_unique_number")]

    def __str__(self):
        return f"{self.job_id} v{self.number}"


class JobDependency(models.Model):
    """``downstream`` runs after ``upstream`` reached ``on`` in the same workflow run."""

    class On(models.TextChoices):
        SUCCESS = "success", "After it succeeds"
        FAILURE = "failure", "After it fails"
        ANY = "any", "After it finishes (any outcome)"

    id = models.BigAutoField(primary_key=True)
    downstream = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="upstream_links")
    upstream = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="downstream_links")
    on = models.CharField(max_length=7, choices=On.choices, default=On.SUCCESS)

    class Meta:
        ordering = ["downstream", "id"]
        constraints = [
            models.UniqueConstraint(fields=["downstream", "upstream"], name="jobdependency_unique_pair"),
            models.CheckConstraint(condition=~Q(downstream=models.F("upstream")), name="jobdependency_not_self"),
        ]
        # The outcome hook asks "has any of these jobs a downstream?" for every group.
        indexes = [models.Index(fields=["upstream"], name="jobdependency_upstream")]

    def __str__(self):
        return f"{self.upstream_id} -> {self.downstream_id} on {self.on}"


class OrganizationJobCount(models.Model):
    """How many jobs an organization has, kept by triggers on the jobs table (apps.jobs.jobcount)
    so that a create checks max_jobs without counting: COUNT(*) reads every one of the
    organization's jobs, on every create."""

    organization = models.OneToOneField("accounts.Organization", primary_key=True, on_delete=models.CASCADE,
                                        related_name="+")
    jobs = models.IntegerField(default=0)

    def __str__(self):
        return f"{self.organization_id}: {self.jobs} jobs"
