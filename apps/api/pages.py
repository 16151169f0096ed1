"""What the pages of every app share besides their access (apps.api.access): the context
their serializers get and the timezone choices of their forms. Here, below the apps with
pages, so monitors' pages (and billing's, notifications', workflows') need not import
apps.web."""

from zoneinfo import available_timezones

TIMEZONES = sorted(available_timezones() - {"localtime", "Factory"})


def serializer_context(request):
    """A page's write is the API's, by the page's actor (set by apps.api.access.member_view)."""
    return {"actor": request.actor, "request": request}
