"""The usage counters and run statistics come from billing (issue 37): their tables
(billing_usagemonth, billing_usageday, billing_jobdaystats) stay as they are; only Django's
state moves (billing 0007 deletes them there), and the content types follow, so
permissions and admin history keep pointing at them."""

import django.db.models.deletion
from django.db import migrations, models


def rename_content_types(source, target, models_):
    def run(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        types = ContentType.objects.using(schema_editor.connection.alias)
        for model in models_:
            if not types.filter(app_label=target, model=model).exists():
                types.filter(app_label=source, model=model).update(app_label=target)
    return run


class Migration(migrations.Migration):

    dependencies = [
        ("billing", "0006_script_jobs"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("executions", "0010_execution_jitter"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
                migrations.CreateModel(
                    name='JobDayStats',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('day', models.DateField()),
                        ('runs', models.PositiveIntegerField(default=0)),
                        ('succeeded', models.PositiveIntegerField(default=0)),
                        ('failed', models.PositiveIntegerField(default=0, help_text='failed + timed_out + dead')),
                        ('skipped', models.PositiveIntegerField(default=0)),
                        ('attempts', models.PositiveIntegerField(default=0)),
                        ('duration_p50_ms', models.PositiveIntegerField(blank=True, null=True)),
                        ('duration_p95_ms', models.PositiveIntegerField(blank=True, null=True)),
                        ('duration_p99_ms', models.PositiveIntegerField(blank=True, null=True)),
                        ('lateness_p50_ms', models.IntegerField(blank=True, null=True)),
                        ('lateness_p95_ms', models.IntegerField(blank=True, null=True)),
                        ('lateness_p99_ms', models.IntegerField(blank=True, null=True)),
                        ('error_kinds', models.JSONField(blank=True, default=dict)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('job', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='day_stats', to='jobs.job')),
                        ('organization', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='accounts.organization')),
                    ],
                    options={
                        'db_table': 'billing_jobdaystats',
                        'ordering': ['-day'],
                        'indexes': [models.Index(fields=['organization', 'day'], name='job_day_stats_org_day')],
                        'constraints': [models.UniqueConstraint(fields=('job', 'day'), name='job_day_stats_unique')],
                    },
                ),
                migrations.CreateModel(
                    name='UsageDay',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('day', models.DateField()),
                        ('runs', models.PositiveBigIntegerField(default=0)),
                        ('succeeded', models.PositiveBigIntegerField(default=0)),
                        ('failed', models.PositiveBigIntegerField(default=0)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('organization', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='usage_days', to='accounts.organization')),
                    ],
                    options={
                        'db_table': 'billing_usageday',
                        'ordering': ['-day'],
                        'constraints': [models.UniqueConstraint(fields=('organization', 'day'), name='usage_day_unique')],
                    },
                ),
                migrations.CreateModel(
                    name='UsageMonth',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('month', models.DateField(help_text='First day of the month (UTC).')),
                        ('runs', models.PositiveBigIntegerField(default=0)),
                        ('pings', models.PositiveBigIntegerField(db_default=0, default=0)),
                        ('quota', models.PositiveBigIntegerField(default=0)),
                        ('updated_at', models.DateTimeField(auto_now=True)),
                        ('organization', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='usage_months', to='accounts.organization')),
                    ],
                    options={
                        'db_table': 'billing_usagemonth',
                        'ordering': ['-month'],
                        'constraints': [models.UniqueConstraint(fields=('organization', 'month'), name='usage_month_unique')],
                    },
                ),
        ]),
        migrations.RunPython(rename_content_types("billing", "executions", ["jobdaystats", "usageday", "usagemonth"]),
                             rename_content_types("executions", "billing", ["jobdaystats", "usageday", "usagemonth"])),
    ]
