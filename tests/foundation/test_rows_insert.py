"""apps.sql.rows.insert writes the row Model.save() would (hot-path creates use it)."""

from datetime import datetime, timezone

import pytest

from apps.sql import rows
from apps.accounts.models import AuditEvent
from apps.jobs.models import Job


def _columns(instance):
    return {field.attname: getattr(instance, field.attname) for field in type(instance)._meta.concrete_fields}


def _job(tenant, name):
    return Job(project=tenant.project, organization=tenant.organization, name=name, cron_expression="0 3 * * *",
               url="https://example.com/hook", headers={"X-A": "1"}, secret_headers={"Authorization": "Bearer s"},
               auth={"type": "basic", "username": "u", "password": "p"}, tags=["a", "b"],
               next_run_at=datetime(2030, 1, 1, tzinfo=timezone.utc))


def test_a_job_inserted_reads_back_as_one_saved_by_the_orm(tenant):
    by_orm, by_rows = _job(tenant, "orm"), _job(tenant, "rows")
    by_orm.save()
    rows.insert(by_rows)
    assert not by_rows._state.adding and by_rows._state.db == "default"
    orm, raw = _columns(Job.objects.get(pk=by_orm.pk)), _columns(Job.objects.get(pk=by_rows.pk))
    for varying in ("id", "name", "created_at", "updated_at"):
        orm.pop(varying), raw.pop(varying)
    assert raw == orm
    assert raw["secret_headers"] == {"Authorization": "Bearer s"} and raw["auth"]["password"] == "p"
    assert Job.objects.get(pk=by_rows.pk).updated_at is not None  # auto_now applied


def test_an_audit_event_is_inserted_with_its_defaults(tenant):
    event = rows.insert(AuditEvent(organization=tenant.organization, action="job.create", data={"name": "x"}))
    stored = AuditEvent.objects.get(pk=event.pk)
    assert (stored.action, stored.data, stored.created_at) == ("job.create", {"name": "x"}, event.created_at)


def test_a_model_without_a_default_key_is_refused(tenant):
    from apps.jobs.models import JobDependency  # an auto-increment key

    with pytest.raises(ValueError, match="primary key"):
        rows.insert(JobDependency())


def test_a_model_with_save_receivers_is_saved_by_save(tenant):
    from django.db.models.signals import post_save

    seen = []

    def receiver(sender, instance, created, **kwargs):
        seen.append((instance.name, created))

    post_save.connect(receiver, sender=Job)
    try:
        rows.insert(_job(tenant, "heard"))
    finally:
        post_save.disconnect(receiver, sender=Job)
    assert seen == [("heard", True)]
    assert Job.objects.filter(name="heard").exists()
