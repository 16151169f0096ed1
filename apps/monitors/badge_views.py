"""GET /badge/monitor/<token>.svg: a monitor's public status badge (apps.badges' image)."""

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from apps.badges.svg import badge_svg
from apps.badges.views import CACHE_SECONDS

from .models import Monitor

#: monitor state -> badge word (apps.badges.svg draws up / failing / paused)
BADGE_STATES = {"new": "paused", "up": "up", "late": "up", "down": "failing", "paused": "paused"}


@require_GET
def monitor_badge(request, token):
    state = Monitor.objects.filter(badge_token=token).values_list("state", flat=True).first()
    if state is None:
        response = HttpResponse("Unknown badge.\n", status=404, content_type="text/plain; charset=utf-8")
    else:
        response = HttpResponse(badge_svg(BADGE_STATES[state]), content_type="image/svg+xml; charset=utf-8")
    response["Cache-Control"] = f"max-age={CACHE_SECONDS}"
    return response
