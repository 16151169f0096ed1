from django.apps import AppConfig


class BadgesConfig(AppConfig):
    name = "apps.badges"
    label = "badges"
    default_auto_field = "django.db.models.BigAutoField"
