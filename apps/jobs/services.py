"""Creating, changing and deleting a job, and its running state (pause, resume).

The API (apps.executions.history.job_api), the pages (apps.web.views.jobs) and the crontab
import validate with JobSerializer and hand its ``validated_data`` here. A change asked for
by a person or an API key commits with its version and its audit event in one transaction,
or none does (apps.accounts.audit.audited): the callers pass ``audit``, the request's. Without
it (pause and resume by the system: plan changes, auto disable) the change alone is made. Refusals are the validation's exceptions (PlanLimit,
JobInvalid); the callers turn them into their answers.
"""

from django.utils import timezone

from apps.accounts.audit import audited
from apps.sql import rows
from apps.sql.clock import database_now
from apps.accounts.models import Organization
from apps.projects import hooks
from apps.projects.models import Project

from . import validation, versions
from .links import job_links
from .models import Job, JobDependency, JobVersion
from .scheduling import due_time, next_occurrence


@audited
def create_job(fields, *, actor, source=JobVersion.Source.API, audit, **data):
    """A new job of JobSerializer's validated ``fields`` (``dependencies``: [(upstream job,
    on)]), made by ``actor``, with its first version and its audit event (``data`` goes into
    the event). Raises PlanLimit past the plan's job quota and JobInvalid when the
    dependencies close a cycle after all (checked again with the project locked)."""
    fields = dict(fields)
    links = fields.pop("dependencies", None)
    job = Job(**fields, organization=_room_for_a_job(actor.organization))
    reschedule(job, now=database_now())  # the database's clock places the first run
    _not_expired_without_schedule(job)
    check_links(job, links or [])
    rows.insert(job)  # job.save() without the ORM's insert compiler
    job.write_due()
    _save_links(job, links)
    versions.record(job, None, [(upstream.pk, on) for upstream, on in links or ()],
                    author=_author(actor), source=source)
    if not links:
        job.loaded_links = {"upstream_links": [], "downstream_links": []}  # a new job has none
    audit("job.create", job, {"name": job.name, **data})
    return job


@audited
def update_job(job, fields, *, actor, sent, source=JobVersion.Source.API, audit):
    """Change ``job`` to JobSerializer's validated ``fields`` (``dependencies`` as for
    create_job; left out, the job keeps its links), with its new version and its audit event
    naming the fields ``sent``. Raises JobInvalid as create_job does."""
    fields = dict(fields)
    links = fields.pop("dependencies", None)
    enabled = fields.pop("enabled", job.enabled)
    changed = changed_fields(job, fields)
    dependencies = [(link.upstream_id, link.on) for link in job_links(job, "upstream_links")]
    before = versions.definition(job, dependencies)
    if links is not None:
        dependencies = [(upstream.pk, on) for upstream, on in links]
    for name, value in fields.items():
        setattr(job, name, value)
    job.organization_id = job.project.organization_id
    if changed & validation.RESCHEDULING_FIELDS:
        reschedule(job, now=database_now())
        _not_expired_without_schedule(job)
    check_links(job, stored_links(job) if links is None else links)
    # Before the save, which then writes the version's number (see versions.record).
    versions.record(job, before, dependencies, author=_author(actor), source=source)
    job.save()
    _save_links(job, links)
    if enabled and not job.enabled:
        resume_job(job, now=database_now())
    elif job.enabled and not enabled:
        pause_job(job)
    audit("job.update", job, {"fields": sorted(sent)})
    return job


@audited
def rollback_job(job, version, *, actor, audit):
    """Make ``version``'s definition the job's again, as a new version with its audit event
    (apps.jobs.versions.rollback: its refusals, and None when the job already has it)."""
    new = versions.rollback(job, version, author=_author(actor), plan=actor.organization.plan)
    if new is not None:
        audit("job.rollback", job, {"to_version": version.number, "version": new.number})
    return new


def changed_fields(job, fields):
    """The names of ``fields`` whose values differ from ``job``'s."""
    return frozenset(name for name, value in fields.items() if getattr(job, name) != value)


def stored_links(job):
    """The job's upstream links as [(upstream job, on)]."""
    return [(link.upstream, link.on) for link in job.upstream_links.select_related("upstream")]


def check_links(job, links, *, lock=True):
    """Refuse (JobInvalid) upstream ``links`` that close a cycle. When saving (``lock``) the
    project row is locked first, so two concurrent saves cannot close one between them; a
    job without upstreams closes no cycle, so nothing is locked for it."""
    if lock and links:
        Project.objects.select_for_update().filter(pk=job.project_id).first()
    validation.check_dependencies(job, links)


def _save_links(job, links):
    if links is None:
        return
    JobDependency.objects.filter(downstream=job).delete()
    JobDependency.objects.bulk_create([JobDependency(downstream=job, upstream=upstream, on=on)
                                       for upstream, on in links])
    job.loaded_links = None  # the representation reads the new links


def _author(actor):
    return versions.Author(user=actor.user, api_key=actor.api_key)


def _room_for_a_job(organization):
    """``organization``, once sure one more job fits its plan (PlanLimit otherwise). Near
    the limit the organization's row is locked (and returned locked) so that concurrent
    creates cannot overshoot it; far below it the lock would only serialise them."""
    plan = organization.plan
    if validation.far_below_job_quota(organization, plan):
        return organization
    locked = Organization.objects.select_for_update().get(pk=organization.pk)
    validation.check_job_quota(locked, plan)
    return locked


def _not_expired_without_schedule(job):
    if job.schedule_type == Job.ScheduleType.NONE:
        job.expired_at = None  # no next run is normal for a job its upstreams start


@audited
def delete_job(job, *, audit):
    """Delete the job now; its history goes after, in batches (apps.executions.purging)."""
    audit("job.delete", job, {"name": job.name})
    hooks.delete_jobs([job])


@audited
def pause_job(job, *, reason="", audit):
    Job.objects.filter(pk=job.pk).update(enabled=False, paused_reason=reason, updated_at=timezone.now())
    job.enabled, job.paused_reason = False, reason
    job.loaded_due(None)  # the database cleared it (apps.jobs.queries, "the triggers")
    audit("job.pause", job, None)


@audited
def resume_job(job, *, now=None, plan=None, audit):
    """Resume from now: occurrences missed while paused are not caught up. Raises
    PlanLimit when the job no longer fits its organization's plan (e.g. paused by a
    downgrade): it resumes after an upgrade or an edit that brings it within the plan."""
    now = now or database_now()  # resumed from the database's time, not this process's
    validation.check_resumable(job, plan or job.organization.plan, now)
    job.enabled = True
    job.paused_reason = ""
    job.disabled_reason = ""
    job.consecutive_failures = 0
    job.next_run_at = due_time(next_occurrence(job, now), job)
    job.save(update_fields=["enabled", "paused_reason", "disabled_reason", "consecutive_failures",
                            "next_run_at", "updated_at"])
    audit("job.resume", job, None)


def resume_paused_with(organization, reason, *, now=None):
    """Resume the organization's jobs paused with exactly ``reason`` (a cancelled deletion's:
    apps.accounts.hooks), each from ``now``; jobs paused for any other reason stay paused. A
    job that no longer fits the plan stays paused, saying why. Returns how many resumed."""
    now = now or database_now()
    resumed = 0
    for job in Job.objects.for_organization(organization).filter(enabled=False, paused_reason=reason):
        try:
            resume_job(job, now=now)
        except validation.PlanLimit as exc:
            pause_job(job, reason=f"not resumed after the cancelled deletion: {exc.message}"[:200])
        else:
            resumed += 1
    return resumed


def reschedule(job, *, now):
    """Set ``next_run_at`` from the job's schedule after a create or a schedule change
    (the caller saves). A schedule with no run after ``now`` leaves the job expired."""
    occurrence = next_occurrence(job, now)
    job.next_run_at = due_time(occurrence, job)
    job.expired_at = None if occurrence is not None else now
    return job
