"""Each organization's job count, kept by the database itself.

A create checks the plan's max_jobs; counting the organization's jobs for it reads all of them
(more as the organization grows: bench/README.md, "Figures behind the code"), on every create.
Instead, triggers on the jobs table keep OrganizationJobCount right whichever way a job comes
or goes: the API, the admin, a crontab import, a bulk insert, a project's or organization's
cascade delete, raw SQL. The statements (the count's read, the triggers, the recount) are in
apps.jobs.queries.

The triggers are installed after every ``migrate`` (post_migrate), not by a migration:
SQLite drops a table's triggers when Django rebuilds the table to alter it, so a later
migration of the jobs table would lose them silently. Whenever one is missing, it is
(re)created and every count is taken again from the jobs table, in one transaction.
"""

from django.db import connections, transaction

from . import queries
from .models import Job, JobDue, OrganizationJobCount


def trigger_names(using="default"):
    """The triggers on the jobs table of database ``using``: the count's and the due time's."""
    return sorted(queries.count_triggers(using)["triggers"])


def ensure_triggers(using="default"):
    """Install whichever triggers are missing on database ``using`` (the count's and the due
    time's, apps.jobs.queries); recount if a count trigger was."""
    connection = connections[using]
    tables = set(connection.introspection.table_names())
    if not {Job._meta.db_table, OrganizationJobCount._meta.db_table} <= tables:
        return []  # migrated only part of the way (migrate <app> <migration>)
    with transaction.atomic(using=using):
        return queries.install_count_triggers(using, with_due=JobDue._meta.db_table in tables)
