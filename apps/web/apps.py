from django.apps import AppConfig


class WebConfig(AppConfig):
    """The customers' web pages: server-rendered templates, htmx for the live parts."""

    name = "apps.web"
    label = "web"
