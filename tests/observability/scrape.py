"""Scraping /metrics the way Prometheus does, and reading one sample out of it."""

import subprocess
import sys

from prometheus_client.parser import text_string_to_metric_families

# A fresh process (nothing has happened in it yet) prints its own /metrics.
FRESH_SCRAPE = """
import django
django.setup()
from django.test import Client, override_settings
from django.test.utils import setup_test_environment
setup_test_environment()
with override_settings(METRICS_TOKEN="", METRICS_ALLOWED_IPS=["127.0.0.1/32"]):
    response = Client().get("/metrics")
assert response.status_code == 200, response.status_code
print(response.content.decode(), end="")
"""


def fresh_process_metrics(**env):
    """The /metrics text of a new process on the test database (``env``: extra variables)."""
    from tests.support.processes import ROOT, process_env

    result = subprocess.run([sys.executable, "-c", FRESH_SCRAPE], cwd=ROOT, env=process_env(**env),
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def scrape(client):
    response = client.get("/metrics")
    assert response.status_code == 200, response.content[:500]
    return samples_of(response.content.decode())


def samples_of(text):
    samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name, **labels):
    """The sample's value, 0 when absent; labels given must match, others are summed over."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= set(ls))
