"""Scraping /metrics the way Prometheus does, and reading one sample out of it."""

from prometheus_client.parser import text_string_to_metric_families


def scrape(client):
    response = client.get("/metrics")
    assert response.status_code == 200, response.content[:500]
    samples = {}
    for family in text_string_to_metric_families(response.content.decode()):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def value(samples, name, **labels):
    """The sample's value, 0 when absent; labels given must match, others are summed over."""
    wanted = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and wanted <= set(ls))
