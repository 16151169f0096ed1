"""The monthly execution quota at the worker's door.

A plan whose ``over_quota`` is ``block`` stops sending runs once the month's metered
attempts reach its quota: the worker records them as skipped (``quota_exceeded``). A plan
with ``overage`` lets them go on; the statement bills them per 1,000. One query per
worker chunk, and only when the chunk holds a blocking plan's runs.

Workers running at once may each admit up to their in-flight runs before the counter
shows them, so a blocked organization can overshoot its quota by at most that much.
"""

from __future__ import annotations

from apps.plans.models import Plan

from ..models import UsageMonth
from .metering import month_start, utc_day

SKIP_REASON = "quota_exceeded"


def over_quota(items, now):
    """items: [(organization id, plan)] -> [bool]: True for each run to skip. Within a
    chunk, an organization near its quota gets only its remaining runs."""
    blocking = {org: plan for org, plan in items if plan.over_quota == Plan.OverQuota.BLOCK}
    if not blocking:
        return [False] * len(items)
    used = dict(UsageMonth.objects.filter(organization_id__in=list(blocking), month=month_start(utc_day(now)))
                .values_list("organization_id", "runs"))
    left = {org: plan.monthly_executions - used.get(org, 0) for org, plan in blocking.items()}
    refused = []
    for org, _plan in items:
        if org not in left:
            refused.append(False)
            continue
        refused.append(left[org] <= 0)
        left[org] -= 1
    return refused
