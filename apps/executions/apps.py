from django.apps import AppConfig


class ExecutionsConfig(AppConfig):
    name = "apps.executions"
    label = "executions"
    default_auto_field = "django.db.models.BigAutoField"
