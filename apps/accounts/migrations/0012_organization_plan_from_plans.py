"""Organization.plan points at plans.Plan (moved from billing, issue 37): the same table,
so the database's foreign key stays as it is; only Django's state changes."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0011_organizationsso_idp_enforces_mfa"),
        ("plans", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.AlterField(
                model_name="organization",
                name="plan",
                field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="organizations",
                                        to="plans.plan"),
            ),
        ]),
    ]
