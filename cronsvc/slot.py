"""The one implementation a higher layer lends a lower one (docs/architecture.md, "Layers").

A lower app declares a ``Slot``; the higher app fills it from its ``AppConfig.ready()``, and
filling it again replaces what it held. Reading an empty slot names the app that should
have filled it, so a missing ``INSTALLED_APPS`` entry fails loudly instead of silently.
"""

from __future__ import annotations

_EMPTY = object()


class Slot:
    def __init__(self, what, provider, default=_EMPTY):
        self.what, self.provider, self._value = what, provider, default

    def fill(self, value):
        self._value = value
        return value

    @property
    def filled(self):
        return self._value is not _EMPTY

    def get(self):
        if self._value is _EMPTY:
            raise RuntimeError(f"No {self.what} registered: {self.provider} must be installed")
        return self._value
