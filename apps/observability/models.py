from django.db import models


class Heartbeat(models.Model):
    """The last sign of life of one scheduler or worker process.

    A row per process (kind, host, pid), written at most every HEARTBEAT_INTERVAL seconds
    by the process itself; a database row rather than a Redis key so embedded mode (no
    Redis) has heartbeats too. A clean stop deletes the row; a killed process's row
    simply stops moving and is pruned after a day."""

    class Kind(models.TextChoices):
        SCHEDULER = "scheduler", "Scheduler"
        WORKER = "worker", "Worker"

    key = models.CharField(max_length=200, unique=True)  # kind:host:pid
    kind = models.CharField(max_length=20, choices=Kind.choices)
    name = models.CharField(max_length=200)  # the Celery node name, or host:pid
    hostname = models.CharField(max_length=200)
    pid = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    last_seen = models.DateTimeField(db_index=True)
    detail = models.JSONField(default=dict, blank=True)  # e.g. the worker's queues
    # The process's clock minus the database's at its last beat (apps/observability/clock.py).
    clock_skew_seconds = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["kind", "name"]

    def __str__(self):
        return f"{self.kind} {self.name}"
