"""Creating, changing and deleting a project, each change with its audit event in one
transaction (apps.accounts.audit.audited): the API (apps.projects.api) and the pages
(apps.web.views.settings) both go through here with their ``audit``."""

from apps.accounts.audit import audited

from . import hooks


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
