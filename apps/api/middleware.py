"""Security middleware: request size limits (before any view reads the body) and the
Content-Security-Policy of our HTML pages."""

import base64
import secrets

from django.conf import settings
from django.http import HttpResponse, JsonResponse

from apps.api.errors import API_PREFIX

# Inline event handlers our templates use, allowed by hash ('unsafe-hashes'), not wholesale.
_HANDLER_HASHES = ("'sha256-osjxnKEPL/pQJbFk1dKsF7PYFmTyMWGmVSiL9inhxJY='",)  # this.form.submit()
# Third-party pages we serve as they are (the API docs UI loads its bundle from a CDN).
CSP_EXEMPT_PREFIXES = ("/api/docs/",)


def _refuse(request, status, code, message):
    if request.path.startswith(API_PREFIX):
        return JsonResponse({"error": {"code": code, "message": message, "fields": {}}}, status=status)
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
        return refusal and _refuse(request, *refusal)


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
