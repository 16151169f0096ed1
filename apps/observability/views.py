"""/healthz (liveness), /readyz (readiness) and /metrics (Prometheus)."""

import hmac
import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.multiprocess import MultiProcessCollector

from . import heartbeats
from . import metrics as process_metrics
from .collectors import scrape_collectors
from .health import clock_warnings, configuration_warnings, run_checks, web_clock


@never_cache
def healthz(request):
    """Liveness: the process answers. Touches nothing else."""
    return JsonResponse({"status": "ok"})


@never_cache
def readyz(request):
    """Readiness: database and broker reachable, migrations applied. The processes'
    heartbeats are shown, not judged: a web process can serve without a live worker. Clock
    skew (this process's, and each live process's at its last beat) is a warning, not a
    failure: the database's clock decides what is due, whatever a process's says; so is a
    server-mode setting that lets links or mail fail silently (SITE_URL, EMAIL_URL). The
    details are shown only to the callers /metrics admits (``_disclosed``)."""
    checks = run_checks()
    ready = all(value == "ok" for value in checks.values())
    body = {"status": "ok" if ready else "unavailable", "checks": checks, "warnings": []}
    if checks["database"] == "ok":
        reading, body["clock"] = web_clock()
        if checks["migrations"] == "ok":  # the heartbeats table exists
            body["processes"] = heartbeats.snapshot(reading.at)
        body["warnings"] = clock_warnings(body["clock"], body.get("processes", {}))
    body["warnings"] += configuration_warnings()
    return JsonResponse(_disclosed(request, body), status=200 if ready else 503)


def _disclosed(request, body):
    """Anonymous callers learn the status only; the checks' texts, hosts, PIDs, queues,
    workers and clocks go to the callers /metrics admits (METRICS_TOKEN or METRICS_ALLOWED_IPS)."""
    return body if _refuse(request) is None else {"status": body["status"]}


@never_cache
def metrics(request):
    refusal = _refuse(request)
    if refusal is not None:
        return refusal
    process_metrics.declare_known_series()  # the hooks registered after observability's ready()
    body = generate_latest(_process_registry()) + generate_latest(_scrape_registry())
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


def _process_registry():
    """Every process's metrics from the multiprocess files, or this process's own."""
    folder = settings.PROMETHEUS_MULTIPROC_DIR
    if not folder:
        return REGISTRY
    registry = CollectorRegistry()
    MultiProcessCollector(registry, path=folder)
    return registry


def _scrape_registry():
    """What is read at scrape time (queue depths, circuit breakers, outbox backlog, monitors)."""
    registry = CollectorRegistry()
    for collector in scrape_collectors():
        registry.register(collector)
    return registry


def _refuse(request):
    """404 when metrics are not enabled (neither METRICS_TOKEN nor METRICS_ALLOWED_IPS),
    403 unless the bearer token matches or the client's address is allowed."""
    token = settings.METRICS_TOKEN
    networks = _networks(tuple(settings.METRICS_ALLOWED_IPS))
    if not token and not networks:
        return JsonResponse({"error": {"code": "not_found", "message": "Not found."}}, status=404)
    if token and hmac.compare_digest(_bearer(request).encode(), token.encode()):
        return None
    if networks and _address_allowed(request.META.get("REMOTE_ADDR", ""), networks):
        return None
    return JsonResponse({"error": {
        "code": "metrics_forbidden",
        "message": "Send Authorization: Bearer <METRICS_TOKEN>, or scrape from an address in METRICS_ALLOWED_IPS.",
    }}, status=403)


def _bearer(request):
    scheme, _, value = request.META.get("HTTP_AUTHORIZATION", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


@lru_cache(maxsize=8)
def _networks(cidrs):
    return tuple(ipaddress.ip_network(cidr, strict=False) for cidr in cidrs)


def _address_allowed(address, networks):
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in networks if network.version == ip.version)
