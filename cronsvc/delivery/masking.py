"""The copy of a header set that may be kept or shown.

Which headers carry credentials is declared once, in the registry of secrets
(cronsvc.secrets.SECRET_HEADER_NAMES), for both directions: a job's request headers
(stored encrypted, shown masked) and the response headers an endpoint sends back (kept in
history masked, e.g. ``Set-Cookie``).
"""

from cronsvc.secrets import MASK, SECRET_HEADER_NAMES

__all__ = ["MASK", "SECRET_HEADER_NAMES", "masked"]


def masked(headers, also=frozenset()):
    """``headers`` with the value of every credential header, and of those named (lower-case)
    in ``also``, replaced by MASK."""
    return {name: MASK if name.lower() in SECRET_HEADER_NAMES or name.lower() in also else value
            for name, value in (headers or {}).items()}
