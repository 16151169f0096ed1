from django.apps import AppConfig


class ArchivesConfig(AppConfig):
    name = "apps.archives"
    label = "archives"
    default_auto_field = "django.db.models.BigAutoField"
