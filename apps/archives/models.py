"""One row per archive part written to object storage, so listing needs no S3 call."""

from django.db import models
from django.utils import timezone

from apps.accounts.tenancy import tenant_manager
from cronsvc.ids import uuid7


class Archive(models.Model):
    """A gzip-compressed JSON Lines object holding executions the retention purge deleted:
    one organization, one UTC day (of scheduled_for), one purge batch. Recorded in the
    transaction that deletes those executions, after the object was confirmed in the bucket."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="+")
    day = models.DateField(help_text="The UTC day the archived runs were scheduled for.")
    key = models.CharField(max_length=512, unique=True, help_text="The object's key in the archive bucket.")
    rows = models.PositiveIntegerField(help_text="Executions in the object (one JSON line each).")
    bytes = models.PositiveBigIntegerField(help_text="Size of the compressed object.")
    sha256 = models.CharField(max_length=64, help_text="SHA-256 of the compressed object, hex.")
    created_at = models.DateTimeField(default=timezone.now)

    objects = tenant_manager("organization")

    class Meta:
        ordering = ["-day", "-created_at"]
        indexes = [models.Index(fields=["organization", "-day"], name="archive_org_day")]

    def __str__(self):
        return self.key

    @property
    def filename(self):
        return f"cronsvc-executions-{self.day:%Y-%m-%d}-{self.pk}.jsonl.gz"
