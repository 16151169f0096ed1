"""Errors a customer can cause, carrying a machine-readable code for a clear 4xx."""

from __future__ import annotations


class InvalidRequest(ValueError):
    """A job's request or success criteria cannot be accepted.

    ``code`` is stable and machine-readable (``invalid_header``, ``unknown_variable``, ...),
    ``field`` names the offending input (``headers.X-Foo``, ``body``, ``auth.token``, ...).
    """

    def __init__(self, code: str, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.code = code
        self.field = field
        self.message = message
