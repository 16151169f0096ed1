"""How long /healthz, /readyz and /metrics take in-process (target: health under 50 ms).

Needs a migrated database and the broker of the environment:
    DATABASE_URL=... REDIS_URL=... SECRET_KEY=... python bench/bench_health.py
Prints p50 / p95 / max in milliseconds over ROUNDS requests each (the first request and
the first /readyz, which lists the migration files once, are reported on their own)."""

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("ALLOWED_HOSTS", "testserver")
os.environ.setdefault("METRICS_ALLOWED_IPS", "127.0.0.1/32")

import django  # noqa: E402

django.setup()

from django.test import Client  # noqa: E402

ROUNDS = 200


def timed(client, path):
    started = time.perf_counter()
    response = client.get(path)
    elapsed = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, (path, response.status_code, response.content[:300])
    return elapsed


def main():
    client = Client()
    print(f"first request (imports the URLconf): {timed(client, '/healthz'):.1f} ms")
    print(f"first /readyz (lists migration files once): {timed(client, '/readyz'):.1f} ms")
    for path in ("/healthz", "/readyz", "/metrics"):
        samples = sorted(timed(client, path) for _ in range(ROUNDS))
        p95 = samples[int(0.95 * len(samples)) - 1]
        print(f"{path:10s} p50 {statistics.median(samples):6.2f} ms   p95 {p95:6.2f} ms   max {samples[-1]:6.2f} ms")


if __name__ == "__main__":
    main()
