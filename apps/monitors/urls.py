"""Public URLs of monitors: pings and badges (included at the root by config.urls)."""

from django.urls import re_path

from .badge_views import monitor_badge
from .ping_views import PING_PATH, ping

urlpatterns = [
    re_path(f"^{PING_PATH}$", ping, name="monitor-ping"),
    # not "monitor-badge": the API's badge action (router basename "monitor") has that name
    re_path(r"^badge/monitor/(?P<token>[A-Za-z0-9_-]{1,64})\.svg$", monitor_badge, name="monitor-badge-svg"),
]
