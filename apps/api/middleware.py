"""Security middleware: request size limits (before any view reads the body) and the
Content-Security-Policy of our HTML pages; the browser's middleware passed by for requests
made with an API key."""

import base64
import secrets

from django.conf import settings
from django.contrib.auth import middleware as auth_middleware
from django.contrib.messages import middleware as messages_middleware
from django.contrib.sessions import middleware as sessions_middleware
from django.http import HttpResponse, JsonResponse, QueryDict
from django.template.loader import render_to_string
from django_otp import middleware as otp_middleware
from django.urls import Resolver404, resolve
from django.utils.datastructures import MultiValueDict

from apps.api.errors import API_PREFIX

# Inline event handlers our templates use, allowed by hash ('unsafe-hashes'), not wholesale.
_HANDLER_HASHES = ("'sha256-osjxnKEPL/pQJbFk1dKsF7PYFmTyMWGmVSiL9inhxJY='",)  # this.form.submit()
# A page form over MAX_REQUEST_BODY_BYTES (megabytes pasted into one field) is read up to
# this many times the limit, its fields cut to a tenth of it: the form then shows an error
# beside the field that was too long instead of a bare 413.
LONG_FORM_READ_FACTOR = 16
# Third-party pages we serve as they are (the API docs UI loads its bundle from a CDN).
CSP_EXEMPT_PREFIXES = ("/api/docs/",)


# What a person sees when a page's request is over a limit (a browser asks for HTML).
_PAGE_REFUSALS = {
    413: ("Too large to send", "Nothing was saved. Go back, shorten the longest field (a pasted file, "
                               "most likely) and send the form again."),
    414: ("Address too long", "Go back and try again with a shorter address or fewer filters."),
    431: ("Request headers too large", "Your browser sent more cookies or headers than this server "
                                       "reads. Clear this site's cookies, then sign in again."),
}


def _refuse(request, status, code, message):
    if request.path.startswith(API_PREFIX):
        return JsonResponse({"error": {"code": code, "message": message, "fields": {}}}, status=status)
    if status in _PAGE_REFUSALS and "text/html" in request.META.get("HTTP_ACCEPT", ""):
        heading, advice = _PAGE_REFUSALS[status]
        page = render_to_string("web/_error.html", {"code": status, "heading": heading,
                                                    "text": f"{message} {advice}"}, request=request)
        return HttpResponse(page, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


class RequestLimitsMiddleware:
    """413 request_too_large, 414 url_too_long, 431 headers_too_large, with the API's error
    format under /api/. DRF reads the body stream itself (Django's own
    DATA_UPLOAD_MAX_MEMORY_SIZE check never runs for it), so the Content-Length is checked here."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        refusal = self._check(request)
        return refusal or self.get_response(request)

    def _check(self, request):
        refusal = limits_refusal(request.META, len(request.get_full_path()))
        if refusal and refusal[0] == 413 and _takes_long_fields(request):
            return _read_long_form(request)
        return refusal and _refuse(request, *refusal)


def takes_long_fields(view):
    """Marks a page's form view whose over-long posts are read (fields cut) so the form
    answers with its field errors, not the bare 413 (RequestLimitsMiddleware)."""
    view.takes_long_fields = True
    return view


def _takes_long_fields(request):
    if request.method != "POST" or request.path.startswith(API_PREFIX):
        return False
    if request.content_type != "application/x-www-form-urlencoded":
        return False
    try:
        return getattr(resolve(request.path_info).func, "takes_long_fields", False)
    except Resolver404:
        return False


def _read_long_form(request):
    """None after setting the request's POST to its form with its long fields cut short
    (named in ``request.cut_fields``: the view refuses them), or the 413 when even this
    form is too large to read."""
    limit = settings.MAX_REQUEST_BODY_BYTES * LONG_FORM_READ_FACTOR
    length = int(request.META.get("CONTENT_LENGTH") or 0)
    if length > limit:
        return _refuse(request, 413, "request_too_large", f"The form is {length} bytes; at most {limit} are read.")
    # request.read() streams without Django's DATA_UPLOAD_MAX_MEMORY_SIZE check (request.body
    # would raise); the CSRF check and the view then read the form set here.
    form = QueryDict(request.read(limit), encoding=request.encoding, mutable=True)
    longest = settings.MAX_REQUEST_BODY_BYTES // 10
    request.cut_fields = {key: longest for key, values in form.lists() if any(len(v) > longest for v in values)}
    for key in request.cut_fields:
        form.setlist(key, [value[:longest] for value in form.getlist(key)])
    form._mutable = False
    request._post, request._files = form, MultiValueDict()
    return None


def limits_refusal(meta, url_length):
    """(status, code, message) when a request (its WSGI environ / META and the length of its
    path with the query) is over the size limits, else None. The ping fast lane asks it too."""
    try:
        length = int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 400, "invalid", "Content-Length is not a number."
    if length > settings.MAX_REQUEST_BODY_BYTES:
        return (413, "request_too_large",
                f"The request body is {length} bytes; at most {settings.MAX_REQUEST_BODY_BYTES} are accepted.")
    if url_length > settings.MAX_URL_LENGTH:
        return (414, "url_too_long",
                f"The URL is {url_length} characters; at most {settings.MAX_URL_LENGTH} are accepted.")
    header_bytes = sum(len(k) + len(str(v)) for k, v in meta.items() if k.startswith("HTTP_"))
    if header_bytes > settings.MAX_REQUEST_HEADER_BYTES:
        return (431, "headers_too_large", f"The request headers total {header_bytes} bytes; "
                                          f"at most {settings.MAX_REQUEST_HEADER_BYTES} are accepted.")
    return None


def csp_header(nonce):
    return "; ".join([
        "default-src 'self'",
        f"script-src 'self' 'nonce-{nonce}' 'unsafe-hashes' {' '.join(_HANDLER_HASHES)}",
        # Inline style attributes (and htmx's indicator style) are harmless without script.
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ])


class ContentSecurityPolicyMiddleware:
    """A per-request nonce (``request.csp_nonce``, for the few inline scripts) and a CSP on
    HTML responses: scripts only from our origin, no framing, forms post only to us."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.csp_nonce = base64.b64encode(secrets.token_bytes(16)).decode()
        response = self.get_response(request)
        if (settings.CSP_ENABLED and "Content-Security-Policy" not in response
                and response.get("Content-Type", "").startswith("text/html")
                and not request.path.startswith(CSP_EXEMPT_PREFIXES)):
            response["Content-Security-Policy"] = csp_header(request.csp_nonce)
        return response


def by_api_key(request):
    """An API request whose ``Authorization`` names a key (``Bearer ...``): its caller is the
    key, found or refused by ApiKeyAuthentication (which reads the header's first word the
    same way); the session is never asked."""
    return (request.path.startswith(API_PREFIX)
            and request.META.get("HTTP_AUTHORIZATION", "").partition(" ")[0].lower() == "bearer")


class BrowserOnly:
    """Mixed into the browser's middleware (settings.MIDDLEWARE): a request made with an API
    key passes it by. Such a request has no session or messages to read and sets no cookie,
    so the session store, the lazy session user, OTP's wrapper of it and the message storage
    did nothing for it but cost Python calls on every request. Django's own
    CsrfViewMiddleware stays as it is: `check --deploy` looks for it by name, and checks
    the CSRF cookie's settings only when it finds it."""

    async_capable = False  # the fast lane is synchronous (the web process is WSGI)

    def __call__(self, request):
        try:
            passed_by = request.by_api_key
        except AttributeError:  # the first of them: decided once per request
            passed_by = request.by_api_key = by_api_key(request)
        if passed_by:
            return self.get_response(request)
        return super().__call__(request)


class SessionMiddleware(BrowserOnly, sessions_middleware.SessionMiddleware):
    pass


class AuthenticationMiddleware(BrowserOnly, auth_middleware.AuthenticationMiddleware):
    pass


class OTPMiddleware(BrowserOnly, otp_middleware.OTPMiddleware):
    pass


class MessageMiddleware(BrowserOnly, messages_middleware.MessageMiddleware):
    pass
