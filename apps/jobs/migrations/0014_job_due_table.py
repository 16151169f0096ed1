"""Jobs' due times move to a narrow table of their own (apps.jobs.models.JobDue): the scheduler
advances ~40-byte rows instead of the job's whole row and its indexes. A paused job keeps no
due time (its resume sets one), so only enabled jobs' times are copied; the trigger that
clears a disabled job's time is installed after the migration (apps.jobs.jobcount)."""

import django.db.models.deletion
from django.db import migrations, models


def drop_due_trigger(apps, schema_editor):
    """Back to 0013: the trigger that clears a disabled job's due time (installed after each
    migrate, apps.jobs.jobcount) would write a table that no longer exists."""
    on = " ON jobs_job" if schema_editor.connection.vendor == "postgresql" else ""
    schema_editor.execute(f"DROP TRIGGER IF EXISTS jobs_job_disabled{on}")


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0013_job_connect_timeout'),
    ]

    operations = [
        migrations.CreateModel(
            name='JobDue',
            fields=[
                ('job', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='due', serialize=False, to='jobs.job')),
                ('next_run_at', models.DateTimeField(blank=True, null=True)),
            ],
        ),
        migrations.RunSQL(
            "INSERT INTO jobs_jobdue (job_id, next_run_at) SELECT id, next_run_at FROM jobs_job "
            "WHERE enabled AND next_run_at IS NOT NULL",
            reverse_sql="UPDATE jobs_job SET next_run_at = (SELECT d.next_run_at FROM jobs_jobdue d "
                        "WHERE d.job_id = jobs_job.id)",
        ),
        migrations.RemoveIndex(
            model_name='job',
            name='job_due',
        ),
        migrations.RemoveField(
            model_name='job',
            name='next_run_at',
        ),
        migrations.AddIndex(
            model_name='jobdue',
            index=models.Index(condition=models.Q(('next_run_at__isnull', False)), fields=['next_run_at'], name='jobdue_due'),
        ),
        migrations.RunPython(migrations.RunPython.noop, reverse_code=drop_due_trigger),
    ]
