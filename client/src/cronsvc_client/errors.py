"""Errors the client raises, each with the exit code the `cronsvc` command ends with.

The API answers every error as ``{"error": {"code", "message", "fields", ...}}``; ApiError
keeps all of it so a caller can branch on ``code`` rather than on the message.
"""

# Exit codes of the `cronsvc` command (documented in docs/cli.md).
EXIT_OK = 0
EXIT_API_ERROR = 1  # any other 4xx (validation, conflict, plan limit, throttling)
EXIT_USAGE = 2  # bad command line or missing configuration (click's own code too)
EXIT_AUTH = 3  # 401 or 403, or no API key at all
EXIT_NOT_FOUND = 4  # 404
EXIT_SERVER = 5  # 5xx, or the server could not be reached


class CronsvcError(Exception):
    exit_code = EXIT_API_ERROR


class ConfigError(CronsvcError):
    """The client does not know where the API is (no URL)."""

    exit_code = EXIT_USAGE


class MissingApiKey(CronsvcError):
    exit_code = EXIT_AUTH


class NetworkError(CronsvcError):
    """The server could not be reached, or answered something that is not the API."""

    exit_code = EXIT_SERVER


class NotTheApi(NetworkError):
    """Something answered at the URL, but not the cronsvc API (a web page, another JSON API,
    a 404 page of another server): the URL is most likely wrong."""

    def __init__(self, url, what):
        super().__init__(f"{url} does not look like a cronsvc API: {what}.")
        self.url = url
        self.what = what


class ApiError(CronsvcError):
    """An error answer of the API."""

    def __init__(self, status, code, message, fields=None, extra=None):
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.fields = fields or {}
        self.extra = extra or {}

    @property
    def exit_code(self):
        if self.status in (401, 403):
            return EXIT_AUTH
        if self.status == 404:
            return EXIT_NOT_FOUND
        if self.status >= 500:
            return EXIT_SERVER
        return EXIT_API_ERROR


def error_envelope(response):
    """The ``error`` object of an answer in the API's envelope, else None."""
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) and isinstance(error.get("code"), str) else None


def error_from_response(response):
    """The ApiError for an error response, whether or not its body is the API's envelope
    (a proxy's 502 page has none)."""
    error = error_envelope(response)
    if error is None:
        text = (response.text or response.reason or "").strip()[:200]
        return ApiError(response.status_code, f"http_{response.status_code}", text or "no error body")
    extra = {key: value for key, value in error.items() if key not in ("code", "message", "fields")}
    return ApiError(response.status_code, error.get("code", f"http_{response.status_code}"),
                    error.get("message", ""), error.get("fields"), extra)
