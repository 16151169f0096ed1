"""The ping URLs: /ping/<id>, /ping/<id>/start, /ping/<id>/fail, /ping/<id>/<exit code>.

GET, POST and HEAD; no session, CSRF, authentication or template: the unguessable id is
the only credential, and the answer is ``OK`` (or an error in the API's JSON envelope).
"""

import json

from django.http import HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from apps.web import ratelimit

from . import pings
from .models import BODY_LIMIT

MAX_RID = 64
ALLOWED = ("GET", "POST", "HEAD")


def _response(body, status=200, content_type="text/plain", **headers):
    # Content-Length set here: the ping URLs skip CommonMiddleware (apps.monitors.fastlane),
    # and a keep-alive client would otherwise get a chunked answer.
    response = HttpResponse(body, status=status, content_type=content_type)
    response["Content-Length"] = str(len(response.content))
    for name, value in headers.items():
        response[name] = value
    return response


def _error(status, code, message, **headers):
    body = json.dumps({"error": {"code": code, "message": message, "fields": {}}})
    return _response(body, status, "application/json", **headers)


def _kind(action):
    """(kind, exit code) of the URL's last part, or None when it is not one."""
    if action in (None, ""):
        return "success", None
    if action in ("start", "fail"):
        return action, None
    code = int(action)
    if code > 255:
        return None
    return ("success" if code == 0 else "fail"), code


@csrf_exempt
def ping(request, ping_id, action=None):
    if request.method not in ALLOWED:
        return _error(405, "method_not_allowed", "Ping with GET, POST or HEAD.", Allow=", ".join(ALLOWED))
    kind = _kind(action)
    if kind is None:
        return _error(404, "not_found", "Exit codes go from 0 to 255.")
    rid = request.GET.get("rid", "")
    if len(rid) > MAX_RID:
        return _error(400, "invalid_rid", f"rid: at most {MAX_RID} characters (a UUID fits).")
    now = timezone.now()
    target = pings.find(ping_id, now)
    if target is None:
        return _error(404, "not_found", "No monitor has this ping URL.")
    refused = _refused(target)
    if refused is not None:
        return refused
    body = pings.decode_body(request.read(BODY_LIMIT)) if request.method == "POST" else ""
    ping_input = pings.PingInput(kind=kind[0], exit_code=kind[1], rid=rid, method=request.method,
                                 remote_addr=request.META.get("REMOTE_ADDR", ""),
                                 user_agent=request.META.get("HTTP_USER_AGENT", ""), body=body)
    if pings.record(target, ping_input, now) is None:
        return _error(404, "not_found", "No monitor has this ping URL.")
    return _response("OK")


def _refused(target):
    if target.suspended:
        return _error(403, "organization_suspended", "This organization is suspended; pings are not recorded.")
    if target.month_pings >= target.per_month:
        return _error(429, "ping_quota_exceeded",
                      f"The plan allows {target.per_month} pings a month; upgrade the plan for more.")
    hits = ratelimit.hit("monitor-pings", target.organization_id, window=60)
    if hits > target.per_minute:
        _, retry = ratelimit.count("monitor-pings", target.organization_id, window=60)
        return _error(429, "ping_rate_limited",
                      f"The plan allows {target.per_minute} pings a minute; slow down or upgrade the plan.",
                      **{"Retry-After": str(retry)})
    return None
