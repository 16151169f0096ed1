from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0010_direct_adds_become_invitations"),
    ]

    operations = [
        migrations.AddField(
            model_name="organizationsso",
            name="idp_enforces_mfa",
            field=models.BooleanField(
                default=False, verbose_name="the provider enforces multi-factor authentication",
                help_text="On: a sign-in through this provider is not asked for the person's cronsvc two-factor "
                          "code. Off (the default): people who turned two-factor on give their code after the "
                          "provider."),
        ),
    ]
