"""The release phase of a deploy (the Procfile's `release` line, the compose file's one-shot
`release` service): create the database if it is missing and the role may, apply migrations,
then collect static files for the web process. One command rather than `migrate &&
collectstatic`, so every Procfile host and the image's entrypoint run it the same way, as a
single process that exits non-zero when a step fails.

A database that cannot be reached or created stops the release with one line saying what to
do (Django's CommandError: no traceback), not with the 40-line traceback of a failed connect."""

import psycopg
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError, connection

from apps.sql.databases import create_database, database_exists
from apps.sql.modes import on_postgresql

MAINTENANCE_DATABASE = "postgres"  # the database every PostgreSQL server has, as createdb uses


class Command(BaseCommand):
    help = ("Create the database if missing (when the role may), apply migrations and collect static files "
            "(run once per deploy, before the other processes).")

    def handle(self, *args, **options):
        if on_postgresql():
            self._ensure_database()
        call_command("migrate", interactive=False, verbosity=options["verbosity"])
        call_command("collectstatic", interactive=False, verbosity=0)
        self.stdout.write("release: migrations applied, static files collected")

    def _ensure_database(self):
        try:
            connection.ensure_connection()
            return
        except OperationalError as exc:
            refused = exc
        name, params = connection.settings_dict["NAME"], connection.get_connection_params()
        params.pop("cursor_factory", None)
        where = f"{params.get('user')}@{params.get('host') or 'localhost'}:{params.get('port') or 5432}"
        try:
            with psycopg.connect(**{**params, "dbname": MAINTENANCE_DATABASE}, autocommit=True) as server:
                if database_exists(server, name):
                    raise CommandError(f"release: database {name!r} on {where} refused the connection: "
                                       f"{_first_line(refused)}")
                create_database(server, name)
        except psycopg.errors.InsufficientPrivilege:
            raise CommandError(
                f"release: database {name!r} does not exist on {where} and this role may not create it; "
                f"create it (e.g. `createdb -O {params.get('user')} {name}` as a superuser) and run the release "
                "again") from None
        except psycopg.OperationalError as exc:
            raise CommandError(f"release: cannot reach PostgreSQL at {where} (DATABASE_URL): "
                               f"{_first_line(exc)}") from None
        self.stdout.write(f"release: database {name!r} created on {where}")


def _first_line(exc):
    """libpq's message, without its "connection failed: connection to server ... failed:" prefix
    lines (the address is said once, by the caller)."""
    text = " ".join(str(exc).split())
    return text.rsplit("failed: ", 1)[-1]
