"""Which headers carry credentials, and the copy of a header set that may be kept or shown.

One list for both directions: a job's request headers (stored encrypted, shown masked) and
the response headers an endpoint sends back (kept in history masked, e.g. ``Set-Cookie``).
"""

MASK = "••••"
SECRET_HEADER_NAMES = frozenset({
    "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key",
})


def masked(headers, also=frozenset()):
    """``headers`` with the value of every credential header, and of those named (lower-case)
    in ``also``, replaced by MASK."""
    return {name: MASK if name.lower() in SECRET_HEADER_NAMES or name.lower() in also else value
            for name, value in (headers or {}).items()}
