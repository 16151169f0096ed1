"""The open-loop load generator the HTTP benchmarks share (bench_pings.py, bench_api.py): wrk2's
method in asyncio, so a figure is the latency *at* a rate, not the rate a closed loop reaches.

``connections`` keep-alive connections each send their share of the requests on a fixed
timetable (connection n sends at start + n/rate + i * connections/rate), and a request's
latency is counted from the time the timetable says it should have been sent: a slow answer
that delays the requests queued behind it on its connection is counted against them too
(no coordinated omission). "service" is the same request timed from its actual send.
Requests sent in the first ``warmup`` seconds (connections opening) are left out.

A request is a ``Request(kind, method, path, body)``; the figures are per kind and for all
kinds together. The generator's own CPU time is reported (``load_cpu``, in % of one core):
it shares the machine with the server it measures.
"""

from __future__ import annotations

import asyncio
import os
from collections import Counter
import statistics
import time
from dataclasses import dataclass

WARMUP_S = 1.0
ALL = "all"


@dataclass(frozen=True)
class Request:
    kind: str
    method: str
    path: str
    body: bytes = b""


async def _read_response(reader):
    """Status of one HTTP/1.1 response, its body read (Content-Length or chunked)."""
    words = (await reader.readline()).split()
    if len(words) < 2:
        raise ConnectionError("connection closed")
    status = int(words[1])
    length, chunked = 0, False
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding" and b"chunked" in value.lower():
            chunked = True
    if chunked:
        while size := int((await reader.readline()).split(b";")[0], 16):
            await reader.readexactly(size + 2)
        await reader.readline()
    elif length:
        await reader.readexactly(length)
    return status


def _encode(request, headers):
    lines = [f"{request.method} {request.path} HTTP/1.1", "Host: 127.0.0.1", *headers]
    if request.body or request.method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(request.body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + request.body


async def _connection(port, requests, headers, start, interval, offset, warmup, samples):
    """One keep-alive connection sending ``requests`` on its timetable."""
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for index, request in enumerate(requests):
            intended = start + offset + index * interval
            delay = intended - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            sent = loop.time()
            try:
                writer.write(_encode(request, headers))
                status = await _read_response(reader)
            except (ConnectionError, asyncio.IncompleteReadError):
                status = 0  # counted as an error; the next request gets a new connection
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
            done = loop.time()
            if intended - start >= warmup:
                samples.append((request.kind, done - intended, done - sent, status))
    finally:
        writer.close()


async def _run(port, requests, rate, connections, headers, warmup):
    loop = asyncio.get_running_loop()
    interval = connections / rate  # each connection's spacing
    samples = []
    start = loop.time() + 0.2
    shares = [requests[n::connections] for n in range(connections)]
    await asyncio.gather(*(_connection(port, share, headers, start, interval, n / rate, warmup, samples)
                           for n, share in enumerate(shares)))
    return samples, loop.time() - start


def paced_run(port, requests, rate, connections, *, headers=(), warmup=WARMUP_S, ok=(200,)):
    """Send ``requests`` (a list of Request, or of GET paths) at ``rate`` per second over
    ``connections``; returns {kind: figures, ..., "all": figures}. ``ok``: the statuses that
    are not errors."""
    requests = [r if isinstance(r, Request) else Request("get", "GET", r) for r in requests]
    cpu, wall = time.process_time(), time.monotonic()
    samples, elapsed = asyncio.run(_run(port, requests, rate, connections, list(headers), warmup))
    load_cpu = 100 * (time.process_time() - cpu) / (time.monotonic() - wall)
    load = os.getloadavg()[0]
    kinds = {}
    for sample in samples:
        kinds.setdefault(sample[0], []).append(sample)
    kinds[ALL] = samples
    return {kind: figures(rows, len(rows) / max(elapsed - warmup, 1e-9), ok) | {"load": load, "load_cpu": load_cpu}
            for kind, rows in kinds.items()}


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def figures(samples, rate, ok=(200,)):
    latencies = [s[1] * 1000 for s in samples]
    service = [s[2] * 1000 for s in samples]
    errors = [s[3] for s in samples if s[3] not in ok]
    return {"rate": rate, "count": len(latencies), "errors": len(errors), "statuses": dict(Counter(errors)), "p50": percentile(latencies, 0.50),
            "p95": percentile(latencies, 0.95), "p99": percentile(latencies, 0.99), "max": max(latencies),
            "service_p95": percentile(service, 0.95)}


KEYS = ("rate", "p50", "p95", "p99", "max", "service_p95", "load", "load_cpu")


def median_of(runs):
    """The median of each figure over runs (errors: the worst run; count: the sum)."""
    return {key: statistics.median(run[key] for run in runs) for key in KEYS} | {
        "errors": max(run["errors"] for run in runs), "count": sum(run["count"] for run in runs),
        "statuses": dict(sum((Counter(run["statuses"]) for run in runs), Counter()))}
