"""The ping URLs: /ping/<id>, /ping/<id>/start, /ping/<id>/fail, /ping/<id>/<exit code>.

GET, POST and HEAD; no session, CSRF, authentication or template: the unguessable id is
the only credential, and the answer is ``OK`` (or an error in the API's JSON envelope).

``answer`` is the whole behaviour, free of Django's request and response objects: the
Django view below serves it through the URLconf (the test client, any WSGI server), and
apps.monitors.fastlane serves it straight from the WSGI environ in the web process.
"""

import json
from dataclasses import dataclass, field

from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from apps.api import ratelimit

from . import pings
from .models import BODY_LIMIT

#: the URL of a ping; config.urls and the fast lane both match it
# Anything below /ping/ is a ping URL, so a mistyped one (/ping/<id>/FAIL, /ping/<id>/999)
# gets the JSON error a ping client reads, not the site's HTML 404.
PING_PATH = r"ping/(?P<ping_id>[A-Za-z0-9_-]{1,64})(?:/(?P<action>.*?))?/?"
MAX_RID = 64
ALLOWED = ("GET", "POST", "HEAD")
OK = b"OK"


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes = OK
    content_type: str = "text/plain"
    headers: dict = field(default_factory=dict)


def _error(status, code, message, **headers):
    body = json.dumps({"error": {"code": code, "message": message, "fields": {}}}).encode()
    return Answer(status, body, "application/json", headers)


def _kind(action):
    """(kind, exit code) of the URL's last part, or None when it is not one."""
    if action in (None, ""):
        return "success", None
    if action in ("start", "fail"):
        return action, None
    if not (action.isascii() and action.isdigit() and int(action) <= 255):
        return None
    code = int(action)
    return ("success" if code == 0 else "fail"), code


def answer(*, method, ping_id, action, rid, read_body, remote_addr, user_agent):
    """Record the ping and say what to answer. ``read_body(limit)`` reads the request body
    (called for POST only)."""
    if method not in ALLOWED:
        return _error(405, "method_not_allowed", "Ping with GET, POST or HEAD.", Allow=", ".join(ALLOWED))
    kind = _kind(action)
    if kind is None:
        return _error(404, "not_found",
                      "Ping /ping/<id>, /ping/<id>/start, /ping/<id>/fail or /ping/<id>/<exit code 0-255>.")
    if len(rid) > MAX_RID or not rid.isprintable():
        return _error(400, "invalid_rid",
                      f"rid: at most {MAX_RID} printable characters, no control characters (a UUID fits).")
    now = timezone.now()
    target = pings.target_of(ping_id)
    if target is None:
        return _error(404, "not_found", "No monitor has this ping URL.")
    hits = ratelimit.hit("monitor-pings", target.organization_id, window=60)
    body = pings.decode_body(read_body(BODY_LIMIT)) if method == "POST" else ""
    ping_input = pings.PingInput(kind=kind[0], exit_code=kind[1], rid=rid, method=method,
                                 remote_addr=remote_addr, user_agent=user_agent, body=body)
    outcome = pings.record(target, ping_input, now, minute_hits=hits)
    if outcome is None:
        return _error(404, "not_found", "No monitor has this ping URL.")
    if isinstance(outcome, pings.PingRefusal):
        return _refusal(outcome, target)
    return Answer(200)


def _refusal(refusal, target):
    if refusal.code == "organization_suspended":
        return _error(403, refusal.code, "This organization is suspended; pings are not recorded.")
    if refusal.code == "ping_quota_exceeded":
        return _error(429, refusal.code,
                      f"The plan allows {refusal.per_month} pings a month; upgrade the plan for more.")
    _, retry = ratelimit.count("monitor-pings", target.organization_id, window=60)
    return _error(429, refusal.code,
                  f"The plan allows {refusal.per_minute} pings a minute; slow down or upgrade the plan.",
                  **{"Retry-After": str(retry)})


@csrf_exempt
def ping(request, ping_id, action=None):
    result = answer(method=request.method, ping_id=ping_id, action=action, rid=request.GET.get("rid", ""),
                    read_body=request.read, remote_addr=request.META.get("REMOTE_ADDR", ""),
                    user_agent=request.META.get("HTTP_USER_AGENT", ""))
    response = HttpResponse(result.body, status=result.status, content_type=result.content_type)
    # Content-Length set here: the ping URLs skip CommonMiddleware (apps.monitors.fastlane),
    # and a keep-alive client would otherwise get a chunked answer.
    response["Content-Length"] = str(len(result.body))
    for name, value in result.headers.items():
        response[name] = value
    return response
