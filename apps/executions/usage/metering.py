"""Usage metering: every attempt counts once into UsageMonth and UsageDay.

An outcome hook, so it runs inside the transaction that stores the attempts and a bug in
it never stops the recording (apps.executions.hooks.run_outcome_hooks): a redelivered
message that stores no new attempt counts nothing, and a rolled back recording takes its
count with it. ExecutionsConfig.ready() registers it to run after the other hooks: its
upsert locks the organization's counters, which every worker's recording shares, so they
are held only until the commit. On PostgreSQL a group of outcomes costs one statement of
two set-based upserts (``runs = runs + n``, atomic in the database, so concurrent workers
never lose a count), sent like the recording's own statements (arrays, server-side
binding); billing is then told each count before and after (``on_usage_metered``: one
insert only in the rare group that crosses a quota warning threshold). Rows are upserted
in key order, so two workers metering the same organizations cannot deadlock.
"""

from __future__ import annotations

from collections import Counter
from datetime import date, timezone

from django.db.models import F

from apps.plans.models import Plan
from apps.sql.modes import on_postgresql

from ..hooks import usage_metered
from ..models import UsageDay, UsageMonth
from . import queries

SUCCEEDED = "succeeded"


def month_start(day: date) -> date:
    return day.replace(day=1)


def utc_day(moment) -> date:
    return moment.astimezone(timezone.utc).date()


def meter_outcomes(outcomes):
    """The outcome hook: count the attempts stored by this transaction."""
    counted = [outcome for outcome in outcomes if outcome.attempt_counted]
    if not counted:
        return
    months, days = Counter(), Counter()
    for outcome in counted:
        day = utc_day(outcome.finished_at)
        months[(outcome.organization_id, month_start(day))] += 1
        days[(outcome.organization_id, day, _succeeded(outcome))] += 1
    if on_postgresql():
        totals = _pg_add(months, _merge_days(days))
    else:
        totals = _orm_add_months(months)
        _orm_add_days(_merge_days(days))
    usage_metered([(org_id, month, runs - months[(org_id, month)], runs, quota)
                   for org_id, month, runs, quota in totals])


def _succeeded(outcome):
    """Did this attempt succeed? A run that moved on says so by its status; an attempt
    stored after its lease was taken back did not move the run (status ``running``), so
    its own classification (no error kind) tells."""
    return outcome.status == SUCCEEDED if outcome.moved else not outcome.error_kind


def _merge_days(days):
    """{(org, day, succeeded?): n} -> sorted [(org, day, runs, succeeded, failed)]."""
    merged = {}
    for (org, day, succeeded), n in days.items():
        runs, ok = merged.get((org, day), (0, 0))
        merged[(org, day)] = (runs + n, ok + (n if succeeded else 0))
    return [(org, day, runs, ok, runs - ok) for (org, day), (runs, ok) in sorted(merged.items(), key=_key)]


def _key(item):
    (org, day), _ = item
    return (str(org), day)


def _pg_add(months, days):
    """Upsert the monthly and daily counters (one statement); return [(organization id,
    month, runs, quota)] of the months after."""
    keys = sorted(months, key=lambda k: (str(k[0]), k[1]))
    rows = queries.add_usage(((org, month, months[org, month]) for org, month in keys), days)
    by_text = {str(k[0]): k[0] for k in keys}
    return [(by_text.get(str(org), org), month, runs, quota) for org, month, runs, quota in rows]


# Embedded SQLite: one writer at a time, few runs; plain F() upserts are enough.

def _orm_add_months(months):
    totals = []
    for (org, month), n in sorted(months.items(), key=lambda item: (str(item[0][0]), item[0][1])):
        quota = Plan.objects.filter(organizations__id=org).values_list("monthly_executions", flat=True).first() or 0
        UsageMonth.objects.get_or_create(organization_id=org, month=month)
        UsageMonth.objects.filter(organization_id=org, month=month).update(runs=F("runs") + n, quota=quota)
        totals.append((org, month, UsageMonth.objects.get(organization_id=org, month=month).runs, quota))
    return totals


def _orm_add_days(rows):
    for org, day, runs, ok, failed in rows:
        UsageDay.objects.get_or_create(organization_id=org, day=day)
        UsageDay.objects.filter(organization_id=org, day=day).update(
            runs=F("runs") + runs, succeeded=F("succeeded") + ok, failed=F("failed") + failed)

