from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "apps.billing"
    label = "billing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Usage is metered in the transaction that records each attempt.
        from apps.executions.hooks import on_outcomes

        from .metering import meter_outcomes

        on_outcomes(meter_outcomes)

        # A worker skips the runs past a blocking plan's monthly quota; the run statistics
        # read the daily roll-ups.
        from apps.executions.hooks import on_day_stats, on_quota

        from . import quota
        from .models import JobDayStats

        on_quota(quota.over_quota, quota.SKIP_REASON)
        on_day_stats(JobDayStats)

        # A plan changed through accounts (admin, services) re-applies the plan's limits.
        from apps.accounts.hooks import on_plan_change

        from .plan_change import apply_plan

        on_plan_change(apply_plan)

        # A job's validation (apps.jobs, below billing) checks the plan's limits.
        from apps.jobs.hooks import on_plan_limits

        from . import limits

        on_plan_limits(limits)
