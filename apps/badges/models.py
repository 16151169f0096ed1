import secrets

from django.db import models
from django.db.models import Q
from django.utils import timezone

from apps.accounts.tenancy import tenant_manager


def new_token():
    # 18 random bytes: 24 URL-safe characters nobody can guess or enumerate.
    return secrets.token_urlsafe(18)


class Badge(models.Model):
    """A public status image of one job or one project, reachable only through its token."""

    token = models.CharField(max_length=64, unique=True, default=new_token, editable=False)
    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="+")
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    project = models.ForeignKey("projects.Project", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    objects = tenant_manager("organization")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=Q(job__isnull=False, project__isnull=True) | Q(job__isnull=True, project__isnull=False),
                name="badge_one_target"),
            # One badge per job or project: creating it again returns the same URL.
            models.UniqueConstraint(fields=["job"], condition=Q(job__isnull=False), name="badge_unique_job"),
            models.UniqueConstraint(fields=["project"], condition=Q(project__isnull=False), name="badge_unique_project"),
        ]

    def __str__(self):
        return f"badge of {'job ' + str(self.job_id) if self.job_id else 'project ' + str(self.project_id)}"
