"""GET /badge/<token>.svg: public, no session or key; the token is the only secret."""

from django.http import HttpResponse
from django.views.decorators.http import require_GET

from .models import Badge
from .state import badge_state
from .svg import badge_svg

CACHE_SECONDS = 60  # READMEs are viewed through caching proxies (GitHub's camo): stay fresh-ish


@require_GET
def badge_image(request, token):
    badge = Badge.objects.select_related("job").filter(token=token).first()
    if badge is None:
        response = HttpResponse("Unknown badge.\n", status=404, content_type="text/plain; charset=utf-8")
        response["Cache-Control"] = f"max-age={CACHE_SECONDS}"
        return response
    response = HttpResponse(badge_svg(badge_state(badge)), content_type="image/svg+xml; charset=utf-8")
    response["Cache-Control"] = f"max-age={CACHE_SECONDS}"
    return response
