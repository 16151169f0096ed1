"""Background work of the accounts app: data exports and the GDPR housekeeping."""

from celery import shared_task
from django.utils import timezone

from . import gdpr
from .models import DataExport


@shared_task(name=gdpr.BUILD_EXPORT_TASK)
def build_data_export(export_id):
    export = DataExport.objects.select_related("organization__plan").filter(
        pk=export_id, status=DataExport.Status.PENDING).first()
    if export is not None:
        gdpr.run_export(export, now=timezone.now())


@shared_task(name="apps.accounts.tasks.erase_deleted_organizations")
def erase_deleted_organizations():
    return gdpr.erase_due_organizations(now=timezone.now())


@shared_task(name="apps.accounts.tasks.purge_audit_events")
def purge_audit_events():
    return gdpr.purge_audit_events(now=timezone.now())
