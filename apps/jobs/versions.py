"""Job versions: every change of a job's definition keeps the version it made.

A job's ``version`` is the number of its current JobVersion. What changes a job
(apps.jobs.services' create_job and update_job, used by the API, the pages and the crontab
import; the admin's save; ``rollback``) calls ``record`` in the transaction of the change:
one UPDATE ... RETURNING numbers the new version (and serialises concurrent changes of the
job), one INSERT stores it. The scheduler copies ``jobs.version`` onto every execution it
inserts from the row it already claims, so runs name their version at no cost.

A version's ``snapshot`` is the job's definition (its schedule, request, retry and success
rules, windows, dependencies: everything but the running state and the pause switch, which
the audit log records), JSON-native. Secrets never appear in it in clear: the job's secret
fields (those the registry of secrets, cronsvc.secrets, declares for ``jobs.Job``: auth,
secret headers, the script's environment) are masked there and in ``changes``, and kept
encrypted in ``secrets`` for a rollback, as the job itself keeps them.
"""

import copy
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db import transaction
from django.utils import timezone

from apps.sql.clock import database_now
from cronsvc import secrets as registry

from . import queries
from .models import Job, JobDependency, JobVersion

#: Job columns that are running state or bookkeeping, not the definition.
NOT_VERSIONED = frozenset({
    "id", "organization", "enabled", "paused_reason", "last_run_at", "last_status",
    "consecutive_failures", "expired_at", "disabled_reason", "created_at", "updated_at", "version",
})
SECRET_FIELDS = tuple(registry.secrets_of("jobs.Job"))
DEPENDENCIES = "dependencies"


def versioned_fields():
    return [f for f in Job._meta.concrete_fields if f.name not in NOT_VERSIONED]


@dataclass(frozen=True)
class Author:
    user: object = None
    api_key: object = None


class VersionConflict(Exception):
    """A version that cannot be restored as it is (its project or an upstream job is gone)."""

    def __init__(self, message):
        super().__init__(message)
        self.message = message


def definition(job, dependencies):
    """The job's definition with real values (secrets in clear: never store this as it is).
    ``dependencies``: [(upstream job id, on)]."""
    values = {f.name: _json_value(getattr(job, f.attname)) for f in versioned_fields()}
    values[DEPENDENCIES] = sorted(({"job": str(upstream), "on": on} for upstream, on in dependencies),
                                  key=lambda d: d["job"])
    return values


def stored_dependencies(job):
    return list(JobDependency.objects.filter(downstream_id=job.pk).values_list("upstream_id", "on"))


def _json_value(value):
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    return copy.deepcopy(value)


def masked(name, value):
    """A field's value as versions show it: a secret field says which secret, never its value."""
    secret = registry.find("jobs.Job", name)
    return secret.masked(value) if secret else value


def public(values):
    return registry.masked_fields("jobs.Job", values)


def diff(before, after):
    """{field: {"from": ..., "to": ...}} of the fields that differ, secrets masked."""
    return {name: {"from": masked(name, before.get(name)), "to": masked(name, after.get(name))}
            for name in sorted(set(before) | set(after)) if before.get(name) != after.get(name)}


def record(job, before, dependencies, *, author, source, rollback_of=None, now=None):
    """Keep the version a change of ``job`` made (inside the change's transaction).

    ``job`` carries the change, not saved yet for an edit (its save then writes the new
    ``version``: saved first, it would write back the number it read, under a concurrent
    change's); a new job is recorded once inserted, as version 1. ``before``: the
    definition before the change (None for a new job); ``dependencies``: the job's upstream
    links after it. Returns the JobVersion, or None when the definition did not change."""
    now = now or timezone.now()
    after = definition(job, dependencies)
    if before is None:
        number, changes = job.version, {}
    else:
        changes = diff(before, after)
        if not changes:
            return None
        # ``version + 1`` in the job's row, which stays locked until the change commits (a
        # concurrent change waits and takes the number after).
        number = queries.next_version_number(job.pk)
        if number == 2:
            _keep_baseline(job, before)
    job.version = number
    return JobVersion.objects.create(
        job_id=job.pk, organization_id=job.organization_id, number=number, created_at=now, source=source,
        actor_user=author.user, actor_api_key=author.api_key, rollback_of=rollback_of,
        snapshot=public(after), changes=changes, secrets=_secrets(after),
    )


def _secrets(values):
    kept = {name: values[name] for name in SECRET_FIELDS if values.get(name)}
    return kept or None


def _keep_baseline(job, before):
    """A job made before versions were kept (or outside the job services) has no version
    1: its first change keeps the definition it had as version 1 first."""
    if not JobVersion.objects.filter(job_id=job.pk, number=1).exists():
        JobVersion.objects.create(job_id=job.pk, organization_id=job.organization_id, number=1,
                                  created_at=job.created_at, source=JobVersion.Source.INITIAL,
                                  snapshot=public(before), secrets=_secrets(before))


def restored(version):
    """The version's definition with its secrets, as ``definition`` gives it. Raises
    VersionConflict when the version shows a secret it did not keep (nothing to restore)."""
    values = dict(version.snapshot)
    kept = version.secrets or {}
    for name in SECRET_FIELDS:
        if name not in values:  # a version older than the field: the rollback leaves it as it is
            continue
        if values[name] and name not in kept:
            raise VersionConflict(f"Version {version.number} kept its {name} masked only: it cannot be "
                                  f"restored. Roll back to another version or set {name} again.")
        values[name] = kept.get(name)
    return values


def rollback(job, version, *, author, plan, now=None):
    """Make ``version``'s definition the job's again, as a new version (source ``rollback``).

    Validated as an edit is (JobInvalid, PlanLimit from apps.jobs.validation), and refused
    with VersionConflict when its project or an upstream job no longer exists. Returns the
    new JobVersion (None when the job already has that definition)."""
    from apps.projects.models import Project

    from . import validation
    from .services import reschedule

    now = now or database_now()  # a rollback reschedules from the database's time
    target = restored(version)
    before = definition(job, stored_dependencies(job))
    candidate = copy.copy(job)
    fields = {f.name: f for f in versioned_fields()}
    for name, value in target.items():
        if name in fields:
            field = fields[name]
            setattr(candidate, field.attname, None if value is None else field.to_python(value))
    if not Project.objects.filter(pk=candidate.project_id, organization_id=job.organization_id).exists():
        raise VersionConflict(f"Version {version.number}'s project no longer exists.")
    links = _links_of(job, target[DEPENDENCIES])
    changed = frozenset(name for name in fields if before.get(name) != target.get(name))
    validation.validate_job(candidate, plan=plan, now=now, changed=changed)
    validation.check_dependencies(candidate, links)
    if changed & validation.RESCHEDULING_FIELDS:
        reschedule(candidate, now=now)
    with transaction.atomic():
        new = record(candidate, before, [(upstream.pk, on) for upstream, on in links], author=author,
                     source=JobVersion.Source.ROLLBACK, rollback_of=version.number, now=now)
        candidate.save()
        JobDependency.objects.filter(downstream=candidate).delete()
        JobDependency.objects.bulk_create([JobDependency(downstream=candidate, upstream=upstream, on=on)
                                           for upstream, on in links])
    candidate.loaded_links = None  # read again by whoever shows the job
    job.__dict__.update(candidate.__dict__)
    return new


def _links_of(job, dependencies):
    ids = [item["job"] for item in dependencies]
    upstreams = {str(j.pk): j for j in Job.objects.filter(pk__in=ids, organization_id=job.organization_id)}
    missing = [i for i in ids if i not in upstreams]
    if missing:
        raise VersionConflict(f"An upstream job of this version no longer exists: {', '.join(missing)}.")
    return [(upstreams[item["job"]], item["on"]) for item in dependencies]
