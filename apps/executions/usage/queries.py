"""The usage counters' and roll-ups' hand-written SQL (PostgreSQL) and the cursors that
run it: the usage counters' upserts (metering.py), each over arrays built from one column list
(apps.sql.bulk.Unnest), and the day's figures of the roll-ups (rollups.py). The logic
around them, and the ORM paths of the embedded mode's SQLite, stay in those modules."""

from django.db import connection

from apps.accounts.models import Organization
from apps.plans.models import Plan
from apps.sql.bulk import Unnest, binding_cursor
from cronsvc.statuses import FAILED

from ..lateness import lateness_ms_sql
from ..models import Attempt, DeletedJob, Execution, UsageDay, UsageMonth

# --- metering (metering.py) -------------------------------------------------------------

#: Runs to add per (organization, month).
MONTHS = Unnest([("org", "uuid"), ("month", "date"), ("n", "bigint")], placeholder="%s")
#: The quota is copied from the plan in the same statement, so telling whether a warning
#: threshold was crossed needs no further query.
ADD_MONTHS = (
    f"INSERT INTO {UsageMonth._meta.db_table} AS u (organization_id, month, runs, quota, updated_at) "
    f"SELECT v.org, v.month, v.n, p.monthly_executions, now() FROM {MONTHS.source} "
    f"JOIN {Organization._meta.db_table} o ON o.id = v.org JOIN {Plan._meta.db_table} p ON p.id = o.plan_id "
    "ORDER BY v.org, v.month "
    "ON CONFLICT (organization_id, month) DO UPDATE SET runs = u.runs + excluded.runs, "
    "quota = excluded.quota, updated_at = excluded.updated_at "
    "RETURNING organization_id, month, runs, quota"
)

#: Runs, successes and failures to add per (organization, day).
DAYS = Unnest([("org", "uuid"), ("day", "date"), ("runs", "bigint"), ("ok", "bigint"), ("failed", "bigint")],
              alias="d", placeholder="%s")
ADD_DAYS = (
    f"INSERT INTO {UsageDay._meta.db_table} AS u (organization_id, day, runs, succeeded, failed, updated_at) "
    f"SELECT d.org, d.day, d.runs, d.ok, d.failed, now() FROM {DAYS.source} ORDER BY d.org, d.day "
    "ON CONFLICT (organization_id, day) DO UPDATE SET runs = u.runs + excluded.runs, "
    "succeeded = u.succeeded + excluded.succeeded, failed = u.failed + excluded.failed, "
    "updated_at = excluded.updated_at"
)
#: Both counters in one statement (one round trip per group): the days' upsert, which the
#: months' does not read, runs once the months' is done (PostgreSQL completes an unread
#: data-modifying WITH after the main statement), so both keep the key order of two
#: separate statements.
ADD_USAGE = f"WITH days AS ({ADD_DAYS}) {ADD_MONTHS}"


def add_usage(months, days):
    """Add each of ``months``' runs (organization id, month, n) to its UsageMonth and each of
    ``days``' (organization id, day, runs, succeeded, failed) to its UsageDay, both in key
    order, in one statement; returns (organization id, month, runs, quota) of each month
    after."""
    with binding_cursor() as cursor:
        cursor.execute(ADD_USAGE, [*DAYS.params(days), *MONTHS.params(months)])
        return cursor.fetchall()


# --- roll-ups (rollups.py) ---------------------------------------------------------------

E, A, G = Execution._meta.db_table, Attempt._meta.db_table, DeletedJob._meta.db_table
_FAILED = ", ".join(f"'{status}'" for status in sorted(FAILED))
# The runs of one organization's day (organization, start, end, organization): not those
# of a deleted job still being purged, whose row is gone (apps.executions.purging).
_OF_THE_DAY = ("e.organization_id = %s AND e.scheduled_for >= %s AND e.scheduled_for < %s AND e.job_id NOT IN "
               f'(SELECT g.job_id FROM "{G}" g WHERE g.organization_id = %s)')
#: Per job: runs, succeeded, failed, skipped, attempts, and the nearest-rank percentiles
#: (percentile_disc) of durations and of the first attempt's lateness.
DAY_FIGURES = (
    f"SELECT e.job_id, count(*), count(*) FILTER (WHERE e.status = 'succeeded'), "
    f"count(*) FILTER (WHERE e.status IN ({_FAILED})), count(*) FILTER (WHERE e.status = 'skipped'), "
    f"coalesce(sum(e.attempt), 0), "
    f"percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY e.duration_ms), "
    f"percentile_disc(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP "
    f"(ORDER BY {lateness_ms_sql('a.started_at')}) "
    f"FROM {E} e LEFT JOIN {A} a ON a.execution_id = e.id AND a.number = 1 "
    f"WHERE {_OF_THE_DAY} GROUP BY e.job_id"
)
#: Per job and error kind: how many failed runs.
DAY_ERRORS = (
    f"SELECT e.job_id, e.error_kind, count(*) FROM {E} e "
    f"WHERE {_OF_THE_DAY} AND e.status IN ({_FAILED}) AND e.error_kind <> '' GROUP BY 1, 2"
)


def day_figures(organization_id, start, end):
    """The figures of the organization's runs scheduled in [start, end): (DAY_FIGURES'
    rows, DAY_ERRORS' rows (job id, error kind, count)), two statements on one cursor."""
    params = [organization_id, start, end, organization_id]
    with connection.cursor() as cursor:
        cursor.execute(DAY_FIGURES, params)
        figures = cursor.fetchall()
        cursor.execute(DAY_ERRORS, params)
        return figures, cursor.fetchall()
