"""The event stream's outbox: one row per execution or monitor state change, written in
the transaction of the change (so a rolled-back change leaves none) and published to
Redis Streams after commit by the relay (apps.eventstream.relay), which deletes it.

No foreign keys: a row outlives the job, monitor or organization it is about until it is
published, and writing it costs no constraint checks on the hot paths.
"""

from django.db import models
from django.db.models import Q


class OutboxEntry(models.Model):
    class Kind(models.TextChoices):
        EXECUTION = "execution", "Execution"
        MONITOR = "monitor", "Monitor"

    # The order of writing. Not the stream's order: a transaction that took a lower id
    # may commit after one that took a higher id.
    id = models.BigAutoField(primary_key=True)
    # The event's number in the stream (its entry id is ``<stream_id>-0``), given by the
    # relay under its lock before the entry is sent, so a resend after a crash carries the
    # same id and Redis refuses it (apps.eventstream.relay).
    stream_id = models.BigIntegerField(null=True, blank=True)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    status = models.CharField(max_length=12)
    previous = models.CharField(max_length=12, blank=True, db_default="")
    organization_id = models.UUIDField()
    project_id = models.UUIDField(null=True, blank=True)
    # The job (kind execution) or the monitor (kind monitor).
    subject_id = models.UUIDField()
    execution_id = models.UUIDField(null=True, blank=True)
    attempt = models.IntegerField(null=True, blank=True)
    reason = models.CharField(max_length=40, blank=True, db_default="")
    detail = models.JSONField(default=dict, blank=True, db_default={})
    occurred_at = models.DateTimeField()

    class Meta:
        verbose_name = "event stream outbox entry"
        verbose_name_plural = "event stream outbox"
        ordering = ["id"]
        indexes = [
            # Entries numbered but not yet confirmed sent (the relay's first look): few.
            models.Index(fields=["stream_id"], name="stream_outbox_numbered", condition=Q(stream_id__isnull=False)),
        ]

    @property
    def type(self):
        return f"{self.kind}.{self.status}"

    def __str__(self):
        return f"{self.type} {self.execution_id or self.subject_id}"


class StreamCursor(models.Model):
    """One row: the last stream id the relay gave an entry (stream ids only grow)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    last_id = models.BigIntegerField(default=0)

    def __str__(self):
        return f"last stream id {self.last_id}"
