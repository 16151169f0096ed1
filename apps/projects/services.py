"""Creating, changing and deleting a project, and rotating its signing secrets, each change with its audit event in one
transaction (apps.accounts.audit.audited): the API (apps.projects.api) and the pages
(apps.web.views.settings) both go through here with their ``audit``."""

from apps.accounts.audit import audited
from cronsvc.delivery.signing import generate_secret

from . import hooks
from .models import Project


@audited
def create_project(serializer, *, organization, audit):
    project = serializer.save(organization=organization)
    audit("project.create", project, {"name": project.name})
    return project


@audited
def update_project(serializer, *, audit):
    project = serializer.save()
    audit("project.update", project, {"name": project.name, "timezone": project.timezone})
    return project


@audited
def delete_project(project, *, audit):
    """Delete ``project`` and its jobs now; the jobs' history goes after, in batches
    (apps.executions.purging), not inside this transaction."""
    jobs = list(project.jobs.all())
    audit("project.delete", project, {"name": project.name, "jobs": len(jobs)})
    hooks.delete_jobs(jobs)
    project.delete()


@audited
def rotate_signing_secret(project, *, audit):
    """Sign with a new secret first, the current one kept until the rotation ends; returns the new one."""
    project = Project.objects.select_for_update().get(pk=project.pk)
    new = generate_secret()
    project.signing_secrets = [new, *(project.signing_secrets or [])[:1]]
    project.save(update_fields=["signing_secrets"])
    audit("project.signing_secret.rotate", project)
    return new


@audited
def end_signing_secret_rotation(project, *, audit):
    """Keep only the newest secret; False when no rotation was under way."""
    project = Project.objects.select_for_update().get(pk=project.pk)
    secrets = list(project.signing_secrets or [])
    if len(secrets) < 2:
        return False
    project.signing_secrets = secrets[:1]
    project.save(update_fields=["signing_secrets"])
    audit("project.signing_secret.end_rotation", project)
    return True
