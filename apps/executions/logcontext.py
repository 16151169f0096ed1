"""The run a worker thread (or asyncio task) is delivering, for its log lines.

Set once per run on the delivery hot path, where a plain ContextVar.set (~0.1 µs) is much
cheaper than structlog's bind (~3 µs). Observability's log configuration
(apps/observability/logconfig.py) adds it to every record as ``execution_id``. Imported by
config/settings.py through that module, so nothing here touches Django.
"""

from contextvars import ContextVar

EXECUTION_ID = ContextVar("cronsvc_execution_id", default=None)
