"""Outbound HTTP from a script (Network.HTTP): only through the run's egress proxy, which
applies the outbound address guard; everything else stays unreachable. The first tests run
real scripts in the sandbox, the last ones drive the proxy (cronsvc/sandbox/egress.py)
directly for its caps and malformed requests."""

from __future__ import annotations

import json
import os
import socket
import stat
import time

import pytest

from cronsvc.delivery.guard import AddressPolicy
from cronsvc.sandbox import egress as egress_module
from cronsvc.sandbox.egress import EgressProxy, EgressRules
from tests.support.sandbox import PY, SH, box, host_uid, processes_after, run  # noqa: F401
from tests.support.target import start_target

# Tries each URL through HTTP_PROXY and each host:port as a CONNECT tunnel; prints what came.
PROBE = """
import http.client, json, os, urllib.error, urllib.parse, urllib.request

proxy = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])

def fetch(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return [answer.status, None, answer.read().decode()]
    except urllib.error.HTTPError as e:
        return [e.code, e.headers.get("X-Egress-Error"), e.read().decode()]
    except OSError as e:
        return ["error", None, repr(e)]

def tunnel(host, port):
    connection = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=10)
    connection.set_tunnel(host, port)
    try:
        connection.request("GET", "/tunnelled")
        answer = connection.getresponse()
        return [answer.status, None, answer.read().decode()]
    except OSError as e:
        return ["refused", None, str(e)]

print(json.dumps({"fetch": {url: fetch(url) for url in FETCH},
                  "tunnel": {f"{host}:{port}": tunnel(host, port) for host, port in TUNNEL}}))
"""


@pytest.fixture
def endpoint():
    server = start_target()
    yield server
    server.close()


def only(endpoint) -> AddressPolicy:
    """The tests' worker policy: 127.0.0.1, and there only the endpoint's port."""
    return AddressPolicy(allowed_networks=("127.0.0.1/32",), allowed_ports={port_of(endpoint)})


def port_of(endpoint) -> int:
    return endpoint.server.server_address[1]


def probe(box, rules, fetch=(), tunnel=()):
    result = run(box, PY, f"FETCH = {list(fetch)!r}\nTUNNEL = {list(tunnel)!r}\n" + PROBE, egress=rules,
                 wall_seconds=30)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_a_script_reaches_an_allowed_target_through_the_proxy(box, endpoint):
    url = endpoint.url("/from-python?x=1")
    seen = probe(box, EgressRules(policy=only(endpoint)), fetch=[url])
    assert seen["fetch"][url][0] == 200, seen
    (request,) = endpoint.requests_to("/from-python")
    assert request.path == "/from-python?x=1"  # origin-form upstream
    assert request.headers["connection"] == "close"
    assert not any(name.startswith("proxy-") for name in request.headers)


def test_a_shell_script_reaches_it_with_curl_and_its_exit_code_is_its_own(box, endpoint):
    result = run(box, SH, f"""
        echo "$http_proxy $HTTPS_PROXY"
        curl -sS {endpoint.url("/from-curl")}
        wait  # the relay is no child of the script's
        exit 7
    """, egress=EgressRules(policy=only(endpoint)), wall_seconds=30)
    assert result.exit_code == 7, result.stderr
    assert result.stdout.startswith(b"http://127.0.0.1:3128 http://127.0.0.1:3128\n{")
    assert len(endpoint.requests_to("/from-curl")) == 1


def test_forbidden_addresses_are_refused_and_never_contacted(box, endpoint):
    port = port_of(endpoint)
    refused = {
        f"http://169.254.169.254:{port}/latest/meta-data/": "link-local",  # cloud metadata
        f"http://10.0.0.1:{port}/": "private",
        f"http://[::1]:{port}/": "loopback",  # the policy allows 127.0.0.1 only
        "http://127.0.0.1:5432/": "port 5432 is not allowed",  # PostgreSQL
        "http://127.0.0.1:6379/": "port 6379 is not allowed",  # Redis
    }
    tunnels = [("169.254.169.254", 443), ("10.0.0.1", 443), ("127.0.0.1", 6379), ("127.0.0.1", 5432)]
    seen = probe(box, EgressRules(policy=only(endpoint)), fetch=refused, tunnel=tunnels)
    for url, reason in refused.items():
        status, code, body = seen["fetch"][url]
        assert (status, code) == (403, "egress_forbidden"), (url, seen["fetch"][url])
        assert reason in body and body.startswith("cronsvc egress proxy: refused"), body
    for host, tunnel_port in tunnels:
        status, _, message = seen["tunnel"][f"{host}:{tunnel_port}"]
        assert status == "refused" and "403" in message, (host, tunnel_port, message)
    assert endpoint.received == []


def test_loopback_and_names_that_resolve_to_it_are_refused_by_the_default_policy(box, endpoint):
    port = port_of(endpoint)
    urls = [f"http://127.0.0.1:{port}/", f"http://localhost:{port}/", f"http://2130706433:{port}/",
            f"http://127.1:{port}/"]
    seen = probe(box, EgressRules(), fetch=urls, tunnel=[("localhost", 443)])
    for url in urls:
        status, code, body = seen["fetch"][url]
        assert (status, code) == (403, "egress_forbidden") and "loopback" in body, (url, body)
    assert "localhost (" in seen["fetch"][f"http://localhost:{port}/"][2]  # checked after resolving
    assert seen["tunnel"]["localhost:443"][0] == "refused"
    assert endpoint.received == []


def test_a_connect_tunnel_reaches_an_allowed_port(box, endpoint):
    rules = EgressRules(policy=only(endpoint), tunnel_ports=frozenset({port_of(endpoint)}))
    seen = probe(box, rules, tunnel=[("127.0.0.1", port_of(endpoint))])
    assert seen["tunnel"][f"127.0.0.1:{port_of(endpoint)}"][0] == 200, seen
    assert len(endpoint.requests_to("/tunnelled")) == 1


def test_with_network_the_hosts_services_are_still_not_reachable_directly(box, endpoint):
    result = run(box, PY, """
        import socket
        for host, port in [("127.0.0.1", 5432), ("127.0.0.1", 6379), ("::1", 5432), ("1.1.1.1", 80)]:
            try:
                socket.create_connection((host, port), timeout=3).close()
                print("CONNECTED", host, port)
            except OSError:
                print("refused", host, port)
        try:
            socket.getaddrinfo("example.com", 443)
            print("RESOLVED")
        except OSError:
            pass
        print(sorted(line.split(":")[0].strip() for line in open("/proc/net/dev").readlines()[2:]))
    """, egress=EgressRules(policy=only(endpoint)))
    assert result.exit_code == 0, result.stderr
    assert b"CONNECTED" not in result.stdout and b"RESOLVED" not in result.stdout
    assert result.stdout.count(b"refused") == 4
    assert result.stdout.strip().endswith(b"['lo']")


def test_the_relay_leaks_no_descriptor_and_the_proxy_ends_with_the_run(box, endpoint, monkeypatch):
    made = []
    real_mkdtemp = egress_module.tempfile.mkdtemp
    monkeypatch.setattr(egress_module.tempfile, "mkdtemp", lambda **kw: made.append(real_mkdtemp(**kw)) or made[-1])
    result = run(box, PY, "import os; print(sorted(os.listdir('/proc/self/fd')))",
                 egress=EgressRules(policy=only(endpoint)))
    assert result.stdout == b"['0', '1', '2', '3']\n", result.stderr
    assert len(made) == 1 and not os.path.exists(made[0])
    assert processes_after(host_uid(box)) == []  # the relay died with the sandbox


# -- the proxy itself (no sandbox): a client on its Unix socket

def ask(proxy: EgressProxy, raw: bytes, timeout: float = 10) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(timeout)
        client.connect(proxy.socket_path)
        client.sendall(raw)
        answer = b""
        try:
            while chunk := client.recv(65536):
                answer += chunk
        except ConnectionResetError:  # after a refusal, what the proxy did not read
            assert answer
        return answer


def get(url: str) -> bytes:
    return f"GET {url} HTTP/1.1\r\nHost: ignored\r\nProxy-Connection: keep-alive\r\n\r\n".encode()


@pytest.mark.parametrize(("raw", "status"), [
    (b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n", b"400"),  # origin-form: not a proxy request
    (b"GET https://example.com/ HTTP/1.1\r\n\r\n", b"400"),  # https goes through CONNECT
    (b"CONNECT example.com HTTP/1.1\r\n\r\n", b"400"),
    (b"CONNECT example.com:22 HTTP/1.1\r\n\r\n", b"403"),  # a tunnel is for HTTPS ports only
    (b"GET http://user:pw@example.com/ HTTP/1.1\r\n\r\n", b"403"),
    (b"\x16\x03\x01 hello\r\n\r\n", b"400"),
    (b"GET http://example.com/ HTTP/1.1\r\n" + b"X: " + b"y" * 70000 + b"\r\n\r\n", b"431"),
])
def test_requests_the_proxy_does_not_serve_get_a_4xx_with_a_code(raw, status):
    with EgressProxy(EgressRules()) as proxy:
        answer = ask(proxy, raw)
    assert answer.startswith(b"HTTP/1.1 " + status), answer
    assert b"X-Egress-Error: egress_" in answer


@pytest.mark.parametrize("raw", [
    "CONNECT héllo.com:443 HTTP/1.1\r\n\r\n".encode(),  # UTF-8, as a script would send it
    "GET http://héllo.com/ HTTP/1.1\r\n\r\n".encode(),
    "CONNECT ü.example:443 HTTP/1.1\r\n\r\n".encode("latin-1"),
    b"GET http://\xff\xfe/ HTTP/1.1\r\n\r\n",
    # ASCII, but no host name: each of these killed the proxy's thread with a UnicodeError
    b"CONNECT xn--:443 HTTP/1.1\r\n\r\n",
    b"GET http://xn--/ HTTP/1.1\r\n\r\n",
    b"CONNECT " + b"a" * 64 + b".com:443 HTTP/1.1\r\n\r\n",
    b"GET http://" + b"a" * 64 + b".com/ HTTP/1.1\r\n\r\n",
])
def test_a_host_that_is_no_ascii_host_name_is_a_bad_request(raw):
    with EgressProxy(EgressRules()) as proxy:
        answer = ask(proxy, raw)
        assert answer.startswith(b"HTTP/1.1 400 "), answer
        assert b"\r\nX-Egress-Error: egress_bad_request\r\n" in answer
        # and the proxy goes on serving the run
        assert b"X-Egress-Error: egress_forbidden" in ask(proxy, get("http://169.254.169.254/"))


def test_connections_in_total_and_at_once_are_capped(endpoint):
    rules = EgressRules(policy=only(endpoint), max_connections=2, max_open=1)
    with EgressProxy(rules) as proxy:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as held:
            held.connect(proxy.socket_path)
            held.sendall(get(endpoint.url("/hang?seconds=5")))
            time.sleep(0.2)
            assert ask(proxy, get(endpoint.url("/second"))).startswith(b"HTTP/1.1 429")
        time.sleep(0.2)  # the held one is gone: one at a time again
        assert ask(proxy, get(endpoint.url("/third"))).startswith(b"HTTP/1.1 200")
        answer = ask(proxy, get(endpoint.url("/fourth")))
    assert answer.startswith(b"HTTP/1.1 429") and b"at most 2 connections" in answer
    assert endpoint.requests_to("/second") == [] and endpoint.requests_to("/fourth") == []


def test_bytes_are_capped_per_run(endpoint):
    with EgressProxy(EgressRules(policy=only(endpoint), max_bytes=50_000)) as proxy:
        answer = ask(proxy, get(endpoint.url("/big?bytes=500000")))
        assert answer.startswith(b"HTTP/1.1 200") and len(answer) < 200_000  # cut
        assert ask(proxy, get(endpoint.url("/after"))).startswith(b"HTTP/1.1 429")


def test_an_idle_connection_is_closed_and_closing_the_proxy_ends_every_connection(endpoint):
    with EgressProxy(EgressRules(policy=only(endpoint), idle_seconds=0.5)) as proxy:
        started = time.monotonic()
        assert ask(proxy, get(endpoint.url("/hang?seconds=10"))) == b""
        assert time.monotonic() - started < 3
    proxy = EgressProxy(EgressRules(policy=only(endpoint)))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(5)
        client.connect(proxy.socket_path)
        client.sendall(get(endpoint.url("/hang?seconds=10")))
        time.sleep(0.2)
        started = time.monotonic()
        proxy.close()
        assert client.recv(100) == b"" and time.monotonic() - started < 3
    assert not os.path.exists(proxy.directory)


def test_the_socket_belongs_to_the_runs_host_user_alone():
    with EgressProxy(EgressRules(), owner=1_912_345_678) as proxy:
        directory, sock = os.stat(proxy.directory), os.stat(proxy.socket_path)
    assert (directory.st_uid, stat.S_IMODE(directory.st_mode)) == (1_912_345_678, 0o700)
    assert (sock.st_uid, stat.S_IMODE(sock.st_mode), stat.S_ISSOCK(sock.st_mode)) == (1_912_345_678, 0o600, True)
