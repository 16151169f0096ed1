"""Customer data rights: export everything an organization holds, erase it after a grace
period, and keep audit events only AUDIT_RETENTION_DAYS.

Which tables hold an organization's data is found from the models themselves (every model
with a foreign key to Organization, and the models hanging off those), so a model added
later is exported and erased without touching this module.
"""

import gzip
import io
import logging
from datetime import timedelta
from functools import partial

from celery import current_app
from django.apps import apps
from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models, transaction

from cronsvc import secrets as registry

from .hooks import resume_after_cancelled_deletion
from .models import AuditEvent, DataExport, ErasedOrganization, Membership, Organization, User
from .audit import audited

log = logging.getLogger(__name__)
# Never exported: key hashes, archives. Secret fields (those the registry of secrets,
# cronsvc.secrets, declares) are exported masked: which secret, never its value.
NEVER_EXPORTED = {"salt", "secret_hash", "token_hash", "password", "archive"}
EXPORT_FORMAT = 1
EXPORT_CHUNK_SIZE = 2000
#: The task that builds a requested export, sent by name (apps/accounts/tasks.py runs it).
BUILD_EXPORT_TASK = "apps.accounts.tasks.build_data_export"
_json = DjangoJSONEncoder().encode


# --- which tables


def _foreign_keys_to(model, targets):
    return [f for f in model._meta.concrete_fields
            if isinstance(f, models.ForeignKey) and f.related_model in targets]


def organization_tables():
    """[(model, lookup from the model to its organization)]: direct foreign keys first,
    then models whose foreign key leads to one of those (an attempt via its execution)."""
    direct = {}
    for model in apps.get_models():
        if model is Organization:
            continue
        keys = _foreign_keys_to(model, {Organization})
        if keys:
            direct[model] = keys[0].name
    tables = list(direct.items())
    for model in apps.get_models():
        if model in direct or model is Organization:
            continue
        keys = _foreign_keys_to(model, set(direct))
        if keys:
            key = keys[0]
            tables.append((model, f"{key.name}__{direct[key.related_model]}"))
    return tables


def _exported_fields(model):
    return [f.attname for f in model._meta.concrete_fields if f.name not in NEVER_EXPORTED]


# --- export


def write_export(organization, write):
    """Write everything the organization holds (secrets masked) as one JSON object through
    ``write(text)``, row by row: rows are read EXPORT_CHUNK_SIZE at a time, so a big
    organization's executions are never all in memory at once."""
    header = {
        "format": EXPORT_FORMAT,
        "organization": {"id": str(organization.pk), "name": organization.name, "slug": organization.slug,
                         "plan": organization.plan.code, "created_at": organization.created_at},
        "members": [
            {"email": m.user.email, "name": m.user.get_full_name(), "role": m.role, "joined_at": m.created_at}
            for m in Membership.objects.filter(organization=organization).select_related("user")
        ],
    }
    write("{")
    for key, value in header.items():
        write(f"{_json(key)}: {_json(value)}, ")
    write('"tables": {')
    for index, (label, rows) in enumerate(_exported_tables(organization)):
        write(f"{', ' if index else ''}{_json(label)}: ")
        _write_array(write, rows)
    write("}}")


def _exported_tables(organization):
    """(model label, lazy iterator of rows) for each table holding the organization's data."""
    for model, lookup in organization_tables():
        if model in (DataExport, Membership):
            continue
        rows = _rows_of(model, lookup, organization).order_by("pk").values(*_exported_fields(model))
        rows = rows.iterator(chunk_size=EXPORT_CHUNK_SIZE)
        label = model._meta.label
        yield label, (map(partial(registry.masked_fields, label), rows) if registry.secrets_of(label) else rows)


def _rows_of(model, lookup, organization):
    """The rows the organization sees: a model's own tenant queryset says which when it has
    one (the executions' hides those of deleted jobs still being purged), and a model hanging
    off another follows the rows it hangs off."""
    key, _, rest = lookup.partition("__")
    if rest:
        parent = model._meta.get_field(key).related_model
        return model._base_manager.filter(**{f"{key}__in": _rows_of(parent, rest, organization).values("pk")})
    scoped = model._default_manager.all()
    if getattr(scoped, "tenant_path", None) == lookup:
        return scoped.for_organization(organization)
    return model._base_manager.filter(**{lookup: organization})


def _write_array(write, rows):
    write("[")
    for index, row in enumerate(rows):
        write(f"{', ' if index else ''}{_json(row)}")
    write("]")


def compressed_export(organization):
    """The gzip archive; the JSON text only ever exists one buffer at a time, compressed as written."""
    archive = io.BytesIO()
    with gzip.GzipFile(fileobj=archive, mode="wb") as gzipped, io.TextIOWrapper(gzipped, encoding="utf-8") as text:
        write_export(organization, text.write)
    return archive.getvalue()


@audited
def request_export(organization, *, user, audit):
    """A pending export; the task builds it (big organizations take a while)."""
    export = DataExport.objects.create(organization=organization, requested_by=user)
    audit("organization.export", export)
    transaction.on_commit(lambda: current_app.send_task(BUILD_EXPORT_TASK, args=[str(export.pk)]))
    return export


def run_export(export, *, now):
    try:
        archive = compressed_export(export.organization)
    except Exception as exc:  # noqa: BLE001 - recorded for the owner, logged for operators
        log.exception("export %s failed", export.pk)
        export.status, export.error = DataExport.Status.FAILED, type(exc).__name__
    else:
        export.archive = archive
        export.size_bytes = len(export.archive)
        export.status = DataExport.Status.READY
    export.finished_at = now
    export.save(update_fields=["archive", "size_bytes", "status", "error", "finished_at"])
    return export


# --- deletion


# The pause reason of what a deletion request stopped: cancelling the deletion resumes exactly
# those (apps.accounts.hooks.resume_after_cancelled_deletion), never what was paused before.
DELETION_PAUSE_REASON = "organization deletion requested"


def _stop_schedules(organization):
    """Disable everything enabled that fires on its own (jobs: ``enabled`` and a due time,
    which disabling clears), found by its attributes so this app need not import the jobs
    app. What is already paused keeps its own reason, so a cancelled deletion leaves it paused."""
    for model, lookup in organization_tables():
        names = {f.name for f in model._meta.concrete_fields}
        if "enabled" in names and hasattr(model, "next_run_at"):
            changes = {"enabled": False}
            if "paused_reason" in names:
                changes["paused_reason"] = DELETION_PAUSE_REASON
            model._base_manager.filter(**{lookup: organization, "enabled": True}).update(**changes)


@audited
def request_deletion(organization, *, now, audit):
    """Stop every job now; erase the data after ORG_DELETION_GRACE_DAYS unless cancelled."""
    organization.erase_after = now + timedelta(days=settings.ORG_DELETION_GRACE_DAYS)
    organization.save(update_fields=["erase_after"])
    _stop_schedules(organization)
    audit("organization.delete_requested", organization, {"erase_after": organization.erase_after.isoformat()})
    return organization


@audited
def cancel_deletion(organization, *, now=None, audit):
    """The data stays; the jobs the deletion paused resume from now (runs missed meanwhile
    are not caught up); jobs paused before it stay paused."""
    organization.erase_after = None
    organization.save(update_fields=["erase_after"])
    resumed = resume_after_cancelled_deletion(organization, DELETION_PAUSE_REASON, now=now)
    audit("organization.delete_cancelled", organization, {"resumed_jobs": resumed or 0})
    return organization


def erase_organization(organization, *, now):
    """Erase every row of the organization, and the users who belonged to it alone; keep
    the bare fact of the deletion."""
    with transaction.atomic():
        ErasedOrganization.objects.update_or_create(
            organization_id=organization.pk,
            defaults={"erased_at": now, "plan_code": organization.plan.code,
                      "deletion_requested_at": organization.erase_after
                      and organization.erase_after - timedelta(days=settings.ORG_DELETION_GRACE_DAYS)})
        sole_members = (User.objects.filter(memberships__organization=organization, is_staff=False)
                        .exclude(memberships__in=Membership.objects.exclude(organization=organization)))
        user_ids = list(sole_members.values_list("pk", flat=True))
        for model, lookup in reversed(organization_tables()):
            model._base_manager.filter(**{lookup: organization}).delete()
        organization.delete()
        User.objects.filter(pk__in=user_ids).delete()


def erase_due_organizations(*, now):
    erased = 0
    for organization in Organization.objects.filter(erase_after__lte=now).select_related("plan"):
        erase_organization(organization, now=now)
        erased += 1
    return erased


def purge_audit_events(*, now, batch_size=5000):
    """Delete audit events older than AUDIT_RETENTION_DAYS, in batches (short locks)."""
    cutoff = now - timedelta(days=settings.AUDIT_RETENTION_DAYS)
    purged = 0
    while True:
        ids = list(AuditEvent.objects.filter(created_at__lt=cutoff).values_list("pk", flat=True)[:batch_size])
        if not ids:
            return purged
        purged += AuditEvent.objects.filter(pk__in=ids).delete()[0]
