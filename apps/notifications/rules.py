"""The rule that applies to a job: its own, else its project's defaults, else built-in."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from .models import NotificationRule


@dataclass(frozen=True)
class EffectiveRule:
    failure_threshold: int = 1
    notify_recovery: bool = True
    notify_disabled: bool = True
    late_after_seconds: int | None = None
    long_running_seconds: int | None = None
    reminder_hours: int | None = None
    late_since: datetime | None = None  # runs scheduled before it are not judged late


DEFAULT_RULE = EffectiveRule()
RULE_FIELDS = ("failure_threshold", "notify_recovery", "notify_disabled", "late_after_seconds",
               "long_running_seconds", "reminder_hours")


def as_effective(rule):
    if not rule:
        return DEFAULT_RULE
    return EffectiveRule(**{name: getattr(rule, name) for name in RULE_FIELDS}, late_since=rule.late_since)


def rules_for(jobs):
    """{job_id: EffectiveRule} for these jobs, in one query."""
    jobs = list(jobs)
    if not jobs:
        return {}
    project_ids = {job.project_id for job in jobs}
    rows = NotificationRule.objects.filter(
        Q(job_id__in=[job.id for job in jobs]) | Q(project_id__in=project_ids, job__isnull=True))
    own = {row.job_id: row for row in rows if row.job_id}
    defaults = {row.project_id: row for row in rows if not row.job_id}
    return {job.id: as_effective(own.get(job.id) or defaults.get(job.project_id)) for job in jobs}
