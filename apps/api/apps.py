from django.apps import AppConfig


class ApiConfig(AppConfig):
    """The API platform layer (see docs/architecture.md): no endpoints of its own."""

    name = "apps.api"
    label = "api"
