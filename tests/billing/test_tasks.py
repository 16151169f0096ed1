"""The housekeeping schedules exist on every install (data migration), and the tasks run."""

from datetime import timedelta

from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from apps.billing import tasks
from apps.billing.models import Statement
from apps.executions.models import Execution, JobDayStats


def test_the_migration_schedules_every_billing_chore(db):
    scheduled = dict(PeriodicTask.objects.filter(task__startswith="apps.billing.tasks.").values_list("task", "enabled"))
    assert scheduled == {tasks.ROLL_UP_TASK: True, tasks.PURGE_TASK: True, tasks.STATEMENTS_TASK: True}


def test_the_tasks_roll_up_purge_and_make_statements(make_tenant, make_job):
    free = make_tenant(plan="free")
    job = make_job(free)
    now = timezone.now()
    Execution.objects.create(job=job, organization=free.organization, scheduled_for=now - timedelta(minutes=1),
                             status="succeeded")
    old = Execution.objects.create(job=job, organization=free.organization, scheduled_for=now - timedelta(days=30),
                                   status="succeeded")
    assert tasks.roll_up_recent() >= 1
    assert JobDayStats.objects.filter(job=job, day=now.date()).exists()
    assert tasks.purge_expired() == 1
    assert not Execution.objects.filter(pk=old.pk).exists()
    assert JobDayStats.objects.filter(job=job, day=old.scheduled_for.date()).exists()
    tasks.make_statements()
    # the organization was created this month: nothing to bill for last month
    assert not Statement.objects.filter(organization=free.organization).exists()
