from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "apps.notifications"
    label = "notifications"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from apps.executions.hooks import on_outcomes

        from .alerts import on_run_outcomes

        on_outcomes(on_run_outcomes)

        # What other apps tell an organization (billing's quota warnings) goes out here.
        from apps.accounts.hooks import on_organization_notice

        from .dispatch import notify_organization

        on_organization_notice(notify_organization)
