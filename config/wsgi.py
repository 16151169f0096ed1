"""The WSGI application. The Procfile serves it with granian (a Rust HTTP server: it parses
HTTP and keeps connections outside Python, so a request costs Python only its Django work);
any WSGI server can serve it.

Once Django is loaded, every view module is imported (not on a first request) and Python's
garbage collector is told to ignore what is loaded: a web process holds ~150,000 long-lived
objects (Django, DRF, the URLconf, the schema's serializers) that every full collection would
walk again, a stall with the request that triggered it waiting, several times a minute under
load (bench/README.md, "Figures behind the code"). Young collections then run after 10,000
allocations instead of 700: a page of 50 jobs alone allocates more than 700 objects that live
until its response is sent.
"""

import atexit
import os

from django.core.wsgi import get_wsgi_application

from cronsvc.gc_tuning import freeze_startup_objects

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from apps.monitors.fastlane import PingFastLane  # noqa: E402 - needs the apps loaded

application = PingFastLane(application)  # /ping/...: without the pages' middleware


def _settle():
    from django.conf import settings
    from django.urls import get_resolver

    from apps.monitors import usage
    from apps.observability.metrics import process_exited
    from config.staticfiles import warn_if_uncollected

    warn_if_uncollected(settings.STATIC_ROOT)

    get_resolver().url_patterns  # noqa: B018 - import every view module now
    freeze_startup_objects()
    # A web process that stops drops its live gauges from the multiprocess /metrics.
    atexit.register(process_exited)
    atexit.register(usage.flush)  # the pings this process counted and has not stored yet


_settle()
