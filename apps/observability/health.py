"""Readiness checks: each cheap (a trivial query, a PING), each named in the answer."""

import logging
import os
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.db import connection
from django.apps import apps
from django.db.migrations.recorder import MigrationRecorder
from django.http.request import validate_host

from apps.executions.scheduling.broker_queues import amqp_inspector, broker_client
from apps.sql import clock
from cronsvc.brokers import broker_kind

from . import queries
from .clock import report_skew, skewed

log = logging.getLogger("cronsvc.health")

BROKER_TIMEOUT = 0.25  # seconds: /readyz must answer well within a load balancer's probe
_migrations_applied = {"ok": False}


def check_database():
    queries.select_one()


def check_broker():
    url = settings.CELERY_BROKER_URL
    kind = broker_kind(url)
    if kind == "filesystem":
        options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
        for key in ("data_folder_in", "data_folder_out"):
            if not os.path.isdir(options[key]):
                raise RuntimeError(f"broker folder {options[key]} is missing")
    elif kind == "amqp":
        amqp_inspector(url, BROKER_TIMEOUT).ping()
    else:
        broker_client(url, BROKER_TIMEOUT).ping()


def check_migrations():
    """Every migration file applied. Asked until the answer is yes, then remembered:
    migrations are applied before a release starts, never undone under a running process.
    The files are listed, not imported (Django's migration loader takes most of a second),
    and compared with the django_migrations table in one query."""
    if _migrations_applied["ok"]:
        return
    applied = set(MigrationRecorder(connection).applied_migrations())
    pending = migration_files() - applied
    if pending:
        raise RuntimeError(f"{len(pending)} migrations not applied, e.g. {'.'.join(sorted(pending)[0])}")
    _migrations_applied["ok"] = True


@lru_cache(maxsize=1)
def migration_files():
    """{(app label, migration name)} of every installed app's migrations folder."""
    names = set()
    for app in apps.get_app_configs():
        folder = Path(app.path) / "migrations"
        if folder.is_dir():
            names.update((app.label, path.stem) for path in folder.glob("*.py") if path.stem != "__init__")
    return names


CHECKS = {"database": check_database, "broker": check_broker, "migrations": check_migrations}


def run_checks():
    """{name: "ok" | error text}; the migrations are not checked without a database."""
    results = {}
    for name, check in CHECKS.items():
        if name == "migrations" and results.get("database") != "ok":
            results[name] = "not checked: database unreachable"
            continue
        try:
            check()
            results[name] = "ok"
        except Exception as exc:  # noqa: BLE001 - any failure means not ready; say which
            log.warning("readiness check %s failed: %s", name, exc)
            results[name] = f"{exc.__class__.__name__}: {exc}"[:300]
            if name == "database":
                _close_broken_connection()
    return results


def web_clock():
    """(the database's time, {"skew_seconds", "threshold_seconds", "skewed"}) for this web
    process; the skew is reported (gauge, log warning) as any process's is."""
    reading = clock.reading()
    report_skew("web", reading.skew_seconds)
    return reading, {"skew_seconds": round(reading.skew_seconds, 3),
                     "threshold_seconds": settings.CLOCK_SKEW_WARN_SECONDS,
                     "skewed": skewed(reading.skew_seconds)}


def clock_warnings(web, processes):
    """Readiness warnings: this web process's clock, and every live process's at its last
    beat, off the database's by more than CLOCK_SKEW_WARN_SECONDS."""
    warnings = []
    if web["skewed"]:
        warnings.append(f"clock_skew: this web process's clock is {web['skew_seconds']:+.3f}s off the database's")
    for kind, rows in processes.items():
        for row in rows:
            if row["alive"] and row["clock_skewed"]:
                warnings.append(f"clock_skew: {kind[:-1]} {row['name']}'s clock is {row['clock_skew_seconds']:+.3f}s "
                                "off the database's")
    return warnings


def configuration_warnings():
    """Settings that let links or mail fail silently in server mode, and variables set that
    nothing reads any more: "code: what to do" each.
    Logged once by every process at start-up (ObservabilityConfig.ready) and shown by /readyz."""
    warnings = [f"variable_removed: {name} is set but no longer read: {settings.REMOVED_VARIABLES[name]}; "
                "unset it (docs/configuration.md)" for name in settings.REMOVED_VARIABLES_SET]
    if settings.EMBEDDED:
        return warnings
    if not settings.SITE_URL_SET:
        warnings.append(f"site_url_unset: SITE_URL is not set, so links sent to customers (ping, badge, "
                        f"notification, invitation and SSO callback URLs) use {settings.SITE_URL}; set it "
                        "to the public address of the web process (docs/configuration.md)")
    else:
        host = urlsplit(settings.SITE_URL).hostname or ""
        if not validate_host(host, settings.ALLOWED_HOSTS):
            warnings.append(f"site_url_mismatch: SITE_URL's host {host!r} is not in ALLOWED_HOSTS, so the links "
                            "sent to customers lead to a host this server refuses; make the two agree")
    if not settings.MAIL_CONFIGURED:
        warnings.append("email_unset: no mail leaves this server (EMAIL_URL unset, or a console or dummy "
                        "backend), so password resets, invitations and alerts reach nobody; set EMAIL_URL "
                        "(docs/configuration.md)")
    return warnings


def log_configuration_warnings():
    for warning in configuration_warnings():
        log.warning("configuration: %s", warning)


def _close_broken_connection():
    try:
        connection.close()
    except Exception:  # noqa: BLE001 - already broken
        pass
