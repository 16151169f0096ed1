from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "apps.accounts"
    label = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.db.backends.signals import connection_created

        from apps.sql.pgtypes import use_native_timestamptz_loader

        connection_created.connect(use_native_timestamptz_loader, dispatch_uid="native_timestamptz_loader")
