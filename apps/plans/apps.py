from django.apps import AppConfig


class PlansConfig(AppConfig):
    """The plan catalogue and its limits: what a tenant may do (docs/billing.md). Below
    accounts, whose ``Organization.plan`` points here, so every app that reads a plan
    imports it; billing, on the top floor, keeps the money."""

    name = "apps.plans"
    label = "plans"
    default_auto_field = "django.db.models.BigAutoField"
