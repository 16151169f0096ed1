from django.apps import AppConfig


class EventStreamConfig(AppConfig):
    name = "apps.eventstream"
    label = "eventstream"
    verbose_name = "Event stream"
    default_auto_field = "django.db.models.BigAutoField"
