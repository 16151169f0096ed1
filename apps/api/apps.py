from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The API platform layer (see docs/architecture.md) and the accounts' endpoints."""

    name = "apps.api"
    label = "api"

    def ready(self):
        self._invalidate_key_cache()

    @staticmethod
    def _invalidate_key_cache():
        """Changes that decide whether an API key may authenticate reach the key cache of
        every web process (apps/api/keycache.py). Signals, not save() overrides: they
        also fire for the admin's bulk deletes and for keys deleted with their organization."""
        from django.db.models.signals import post_delete, post_save

        from apps.plans.models import Plan

        from . import keycache

        for signal in (post_save, post_delete):
            signal.connect(keycache.key_saved, sender="accounts.ApiKey", dispatch_uid=f"keycache_key_{signal}")
            signal.connect(keycache.plan_saved, sender=Plan, dispatch_uid=f"keycache_plan_{signal}")
        post_save.connect(keycache.organization_saved, sender="accounts.Organization",
                          dispatch_uid="keycache_organization")
