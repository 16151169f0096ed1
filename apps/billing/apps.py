from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "apps.billing"
    label = "billing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        # Imported here, not at the top: Django loads an AppConfig before any model.
        from apps.accounts.hooks import on_plan_change
        from apps.executions.hooks import on_usage_metered

        from .plan_change import apply_plan
        from .warnings import warn_crossed

        # The metering (apps.executions.usage) tells billing each group's counts: billing
        # warns the organization at its quota thresholds.
        on_usage_metered(warn_crossed)
        # A plan changed through accounts (admin, services) pauses, resumes and requeues the
        # organization's jobs and runs, which live above accounts.
        on_plan_change(apply_plan)
