"""Plan comes down from billing (issue 37): the table billing_plan stays as it is; only
Django's state moves (billing 0007 deletes it there), and the content type follows, so
permissions and admin history keep pointing at it."""

from django.db import migrations, models


def rename_content_type(source, target, models_):
    def run(apps, schema_editor):
        ContentType = apps.get_model("contenttypes", "ContentType")
        types = ContentType.objects.using(schema_editor.connection.alias)
        for model in models_:
            if not types.filter(app_label=target, model=model).exists():
                types.filter(app_label=source, model=model).update(app_label=target)
    return run


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("billing", "0006_script_jobs"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
                migrations.CreateModel(
                    name='Plan',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('code', models.SlugField(max_length=40, unique=True)),
                        ('name', models.CharField(max_length=80)),
                        ('max_jobs', models.PositiveIntegerField()),
                        ('min_interval_seconds', models.PositiveIntegerField()),
                        ('max_timeout_seconds', models.PositiveIntegerField()),
                        ('max_attempts', models.PositiveIntegerField()),
                        ('retention_days', models.PositiveIntegerField()),
                        ('max_concurrency', models.PositiveIntegerField()),
                        ('monthly_executions', models.PositiveBigIntegerField()),
                        ('over_quota', models.CharField(choices=[('block', 'Block runs past the quota'), ('overage', 'Bill overage per 1,000 runs')], default='block', max_length=10)),
                        ('overage_cents_per_1000', models.PositiveIntegerField(default=0)),
                        ('api_requests_per_minute', models.PositiveIntegerField(default=60)),
                        ('auto_disable_after_failures', models.PositiveIntegerField(default=25)),
                        ('max_monitors', models.PositiveIntegerField(db_default=5, default=5)),
                        ('monitor_pings_per_minute', models.PositiveIntegerField(db_default=60, default=60)),
                        ('monitor_pings_per_month', models.PositiveBigIntegerField(db_default=50000, default=50000)),
                        ('script_wall_seconds', models.PositiveIntegerField(db_default=30, default=30)),
                        ('script_cpu_seconds', models.PositiveIntegerField(db_default=10, default=10)),
                        ('script_memory_mb', models.PositiveIntegerField(db_default=256, default=256)),
                        ('script_max_processes', models.PositiveIntegerField(db_default=32, default=32)),
                        ('script_output_kib', models.PositiveIntegerField(db_default=64, default=64, help_text='Each of stdout and stderr.')),
                        ('script_tmp_mb', models.PositiveIntegerField(db_default=16, default=16)),
                        ('queue', models.CharField(help_text="Celery queue for this plan's runs.", max_length=60)),
                        ('monthly_price_cents', models.PositiveIntegerField(default=0)),
                        ('created_at', models.DateTimeField(auto_now_add=True)),
                    ],
                    options={
                        'db_table': 'billing_plan',
                        'ordering': ['monthly_price_cents', 'code'],
                    },
                ),
        ]),
        migrations.RunPython(rename_content_type("billing", "plans", ["plan"]),
                             rename_content_type("plans", "billing", ["plan"])),
    ]
