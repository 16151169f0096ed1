from django.apps import AppConfig


class MonitorsConfig(AppConfig):
    name = "apps.monitors"
    label = "monitors"
    default_auto_field = "django.db.models.BigAutoField"
