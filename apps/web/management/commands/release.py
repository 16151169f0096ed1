"""The release phase of a deploy (the Procfile's `release` line, the compose file's one-shot
`release` service): apply migrations, then collect static files for the web process. One
command rather than `migrate && collectstatic`, so every Procfile host and the image's
entrypoint run it the same way, as a single process that exits non-zero when a step fails."""

from django.core.management import call_command
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Apply migrations and collect static files (run once per deploy, before the other processes)."

    def handle(self, *args, **options):
        call_command("migrate", interactive=False, verbosity=options["verbosity"])
        call_command("collectstatic", interactive=False, verbosity=0)
        self.stdout.write("release: migrations applied, static files collected")
