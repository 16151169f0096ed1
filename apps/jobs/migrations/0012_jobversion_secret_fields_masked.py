"""Job versions kept before the registry of secrets (cronsvc.secrets) had a job's script
environment in clear in their snapshot and changes. Move every secret field the registry
declares for jobs.Job that a stored snapshot still shows in clear into the version's
encrypted ``secrets`` (so a rollback still restores it), and mask it in the snapshot and
in the changes. Rows already masked are left as they are: running it again changes nothing."""

from django.db import migrations

import apps.accounts.encryption
from cronsvc import secrets as registry


def mask_version_secrets(apps, schema_editor):
    JobVersion = apps.get_model("jobs", "JobVersion")
    fields = registry.secrets_of("jobs.Job")
    for version in JobVersion.objects.order_by("pk").iterator(chunk_size=500):
        snapshot, changes = dict(version.snapshot or {}), dict(version.changes or {})
        kept = dict(version.secrets or {})
        for name, secret in fields.items():
            value = snapshot.get(name)
            if value and secret.masked(value) != value:
                kept.setdefault(name, value)
                snapshot[name] = secret.masked(value)
            change = changes.get(name)
            if isinstance(change, dict):
                changes[name] = {side: secret.masked(item) for side, item in change.items()}
        if (snapshot, changes, kept or None) != (version.snapshot, version.changes, version.secrets):
            version.snapshot, version.changes, version.secrets = snapshot, changes, kept or None
            version.save(update_fields=["snapshot", "changes", "secrets"])


class Migration(migrations.Migration):

    dependencies = [
        ('jobs', '0011_job_script_allow_network'),
    ]

    operations = [
        migrations.AlterField(
            model_name='jobversion',
            name='secrets',
            field=apps.accounts.encryption.EncryptedJSONField(blank=True, help_text="This version's secret fields (cronsvc.secrets), for a rollback.", null=True),
        ),
        migrations.RunPython(mask_version_secrets, migrations.RunPython.noop),
    ]
