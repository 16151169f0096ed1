"""The billing app's hand-written SQL (PostgreSQL): the usage counters' upserts, each over
arrays built from one column list (apps.sql.bulk.Unnest)."""

from apps.accounts.models import Organization
from apps.sql.bulk import Unnest

from .models import Plan, UsageDay, UsageMonth

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
              placeholder="%s")
ADD_DAYS = (
    f"INSERT INTO {UsageDay._meta.db_table} AS u (organization_id, day, runs, succeeded, failed, updated_at) "
    f"SELECT v.org, v.day, v.runs, v.ok, v.failed, now() FROM {DAYS.source} ORDER BY v.org, v.day "
    "ON CONFLICT (organization_id, day) DO UPDATE SET runs = u.runs + excluded.runs, "
    "succeeded = u.succeeded + excluded.succeeded, failed = u.failed + excluded.failed, "
    "updated_at = excluded.updated_at"
)
