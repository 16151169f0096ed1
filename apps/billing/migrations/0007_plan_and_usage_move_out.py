"""Plan moves to apps.plans, the usage counters and run statistics to apps.executions
(issue 37). Their tables stay as they are: billing only forgets them in Django's state, after
the new apps have taken them (plans 0001, executions 0011) and every foreign key points there."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0012_organization_plan_from_plans"),
        ("billing", "0006_script_jobs"),
        ("executions", "0011_usage_from_billing"),
        ("plans", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.AlterField(
                model_name="statement",
                name="plan",
                field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+",
                                        to="plans.plan"),
            ),
            migrations.DeleteModel(name="JobDayStats"),
            migrations.DeleteModel(name="UsageDay"),
            migrations.DeleteModel(name="UsageMonth"),
            migrations.DeleteModel(name="Plan"),
        ]),
    ]
