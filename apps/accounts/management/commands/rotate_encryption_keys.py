"""Re-encrypt every stored secret under the newest ENCRYPTION_KEYS key.

    ENCRYPTION_KEYS=<new>,<old> manage.py rotate_encryption_keys
    manage.py rotate_encryption_keys --check      # values still under an old key
    manage.py rotate_encryption_keys --resume accounts.Organization:42

Safe to interrupt and run again: values already under the newest key are skipped.
"""

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError

from apps.accounts import rotation


class Command(BaseCommand):
    help = "Re-encrypt every encrypted field under the newest key (batched, resumable)."

    def add_arguments(self, parser):
        parser.add_argument("--batch-size", type=int, default=500)
        parser.add_argument("--check", action="store_true", help="Only count values under an old key.")
        parser.add_argument("--resume", metavar="MODEL:PK",
                            help="Start after this primary key of this model (printed by a previous run).")

    def handle(self, *args, batch_size, check, resume, **options):
        if check:
            stale = rotation.pending()
            for name, count in stale.items():
                self.stdout.write(f"{name}: {count} values under an old key")
            self.stdout.write("all values are under the newest key" if not stale else "run without --check")
            return
        models = rotation.encrypted_fields()
        start_model, after = self._resume_point(resume, models)
        total = 0
        for model, names in models:
            if start_model is not None and rotation.label(model) != start_model:
                continue
            for progress in rotation.rotate_model(model, names, batch_size=batch_size,
                                                  after=after if start_model else None):
                total += progress.rotated
                self.stdout.write(f"{progress.model}:{progress.last_pk} rotated {progress.rotated}"
                                  f" of {progress.checked}")
            start_model = after = None
        self.stdout.write(self.style.SUCCESS(f"done: {total} rows re-encrypted; old keys may now be removed"))

    def _resume_point(self, resume, models):
        if not resume:
            return None, None
        name, _, pk = resume.rpartition(":")
        if name not in {rotation.label(m) for m, _ in models}:
            raise CommandError(f"--resume: {name!r} holds no encrypted field")
        field = apps.get_model(name)._meta.pk
        return name, field.to_python(pk)
