from django.apps import AppConfig


class WorkflowsConfig(AppConfig):
    name = "apps.workflows"
    label = "workflows"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from apps.executions.hooks import on_outcomes

        from .triggering import start_downstream

        on_outcomes(start_downstream)
