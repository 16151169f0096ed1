from django.db import models
from django.utils.timezone import now

from apps.accounts.encryption import EncryptedJSONField
from apps.accounts.tenancy import tenant_manager
from apps.sql.loading import QuickLoad
from cronsvc.delivery.signing import generate_secret
from cronsvc.ids import uuid7


def initial_signing_secrets():
    return [generate_secret()]


class Project(QuickLoad, models.Model):
    """A group of jobs inside an organization, with its own default timezone."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    organization = models.ForeignKey("accounts.Organization", on_delete=models.CASCADE, related_name="projects")
    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=80)
    timezone = models.CharField(max_length=64, default="UTC")
    # Newest first; two during a rotation, and runs are then signed with both.
    signing_secrets = EncryptedJSONField(default=initial_signing_secrets)
    created_at = models.DateTimeField(default=now)

    objects = tenant_manager("organization")

    class Meta:
        ordering = ["name"]
        # Granted per object with django-guardian to members limited to some projects.
        permissions = [("access_project", "Can use this project (per-project grant)")]
        constraints = [
            models.UniqueConstraint(fields=["organization", "slug"], name="project_unique_slug_per_org"),
        ]

    def __str__(self):
        return self.name
