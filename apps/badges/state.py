"""What a badge says: up, failing or paused, from the jobs' health (apps.jobs.health)."""

from django.db.models import Count

from apps.jobs.health import health_filter, job_health
from apps.jobs.models import Job

UP, FAILING, PAUSED = "up", "failing", "paused"
#: health -> badge state. Disabled means turned off after failures: shown as failing; a new
#: job (not run yet) is up, as it was before its first run had a state of its own.
BY_HEALTH = {"new": UP, "healthy": UP, "failing": FAILING, "disabled": FAILING, "paused": PAUSED, "expired": PAUSED}


def badge_state(badge):
    if badge.job_id:
        return BY_HEALTH[job_health(badge.job)]
    return project_state(badge.project_id)


def project_state(project_id):
    """Failing when any job fails (or was disabled for it), else up when any job runs,
    else paused (no job, or all paused or expired)."""
    counts = Job.objects.filter(project_id=project_id).aggregate(
        failing=Count("pk", filter=health_filter("failing") | health_filter("disabled")),
        up=Count("pk", filter=health_filter("healthy") | health_filter("new")))
    if counts["failing"]:
        return FAILING
    return UP if counts["up"] else PAUSED
