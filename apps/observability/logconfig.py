"""Logging for every process: structlog renders stdlib and structlog records alike, as one
JSON object per line (LOG_FORMAT=json, server default) or as readable text (console,
the default of embedded ``make run``).

Correlation ids live in context variables: ``request_id`` (web, bound by
RequestIdMiddleware in structlog's) and ``execution_id`` with ``job_id`` (worker: RUN, the
executions app's own, apps/executions/worker/logcontext.py, set for each run's request and around
each run's recording lines), and are merged into every record logged meanwhile, including
plain ``logging`` calls. The web's access log is one such record per request
(apps/observability/middleware.py, logger ``cronsvc.access``), with its request id.
Imported by config/settings.py, so nothing here touches Django.
"""

import structlog

from apps.executions.worker.logcontext import RUN  # the run a worker thread is delivering or recording

FORMATS = ("json", "console")


def add_run_ids(logger, method_name, event_dict):
    run = RUN.get()
    if run is not None:
        event_dict.setdefault("execution_id", str(run[0]))
        event_dict.setdefault("job_id", str(run[1]))
    return event_dict


def _shared_processors():
    return [
        structlog.contextvars.merge_contextvars,
        add_run_ids,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def _renderers(fmt):
    if fmt == "json":
        return [structlog.processors.format_exc_info, structlog.processors.EventRenamer("message"),
                structlog.processors.JSONRenderer()]
    return [structlog.dev.ConsoleRenderer(colors=False, exception_formatter=structlog.dev.plain_traceback)]


def logging_config(fmt, level):
    """The LOGGING dict for Django; also configures structlog's own loggers."""
    if fmt not in FORMATS:
        raise ValueError(f"LOG_FORMAT={fmt!r}: use json or console.")
    structlog.configure(
        processors=[*_shared_processors(), structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {
            "structured": {
                "()": structlog.stdlib.ProcessorFormatter,
                "processors": [structlog.stdlib.ProcessorFormatter.remove_processors_meta, *_renderers(fmt)],
                "foreign_pre_chain": _shared_processors(),
            },
        },
        "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "structured"}},
        "root": {"handlers": ["console"], "level": level},
        "loggers": {"django.db.backends": {"level": "INFO"}},
    }
