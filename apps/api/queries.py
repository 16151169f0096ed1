"""The API app's hand-written SQL: the key read on every request (authentication.py, run by
apps.sql.rows)."""

from apps.accounts.models import ApiKey, Organization
from apps.plans.models import Plan
from apps.sql import rows


def key_by_lookup_sql():
    """The API key by its lookup, joined with its organization and that organization's plan."""
    return (f"SELECT {rows.select_list(ApiKey, 'k')}, {rows.select_list(Organization, 'o')}, "
            f"{rows.select_list(Plan, 'p')} "
            f'FROM "{ApiKey._meta.db_table}" k '
            f'JOIN "{Organization._meta.db_table}" o ON o."id" = k."organization_id" '
            f'JOIN "{Plan._meta.db_table}" p ON p."id" = o."plan_id" '
            'WHERE k."lookup" = %s')
