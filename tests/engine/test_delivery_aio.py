"""The delivery engine (cronsvc.delivery.aio) against real local HTTP(S) servers, sent from
blocking code with ``deliver`` (the engine's coroutine on the process's delivery loop, as a
worker, a test run or a notification sends): every outcome class, the guard on every
connection (redirects included), the total deadline, truncation and connection reuse."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import ipaddress
import json
import socket
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from standardwebhooks.webhooks import Webhook

from cronsvc.delivery.aio import AsyncSession, deliver, loop_thread
from cronsvc.delivery.guard import AddressPolicy
from cronsvc.delivery.outcome import SuccessCriteria, classify, request_started
from cronsvc.delivery.retry import RetryPolicy, should_retry
from cronsvc.delivery.request import PreparedDelivery, RequestSpec, prepare, standard_variables
from cronsvc.delivery.signing import generate_secret

LOOPBACK = AddressPolicy(allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),))
ONLY_127_0_0_2 = AddressPolicy(allowed_networks=(ipaddress.ip_network("127.0.0.2/32"),))


_sessions = []


def make_session(policy, *, ca_bundle=None):
    session = loop_thread().call(lambda: AsyncSession(policy, ca_bundle=ca_bundle))
    _sessions.append(session)
    return session


@pytest.fixture(scope="module", autouse=True)
def _close_sessions_on_their_loop():
    """The module's sessions are closed on the loop's thread at its end. Dropped on the test's thread
    instead, their open connections' uvloop transports would be freed there — libuv handles
    closed from a thread other than the loop's, while the loop runs: a crash inside
    uvloop's run_forever (the segfault of an earlier full run, like MagicStack/uvloop#706)."""
    yield
    while _sessions:
        loop_thread().submit(_sessions.pop().close()).result(30)


# --- a small HTTP server, one per address, recording what it receives -------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def handle_any(self):
        parts = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.received.append({
            "method": self.command, "path": parts.path, "headers": dict(self.headers.items()),
            "body": body, "client_port": self.client_address[1], "request_target": self.path,
        })
        route, _, arg = parts.path.strip("/").partition("/")
        getattr(self, "route_" + route.replace("-", "_"), self.route_ok)(arg, parse_qs(parts.query))

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = handle_any

    def reply(self, status, body=b"", headers=()):
        self.send_response(status)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def route_ok(self, arg, query):
        self.reply(200, b"hello", [("Content-Type", "text/plain; charset=utf-8")])

    def route_status(self, arg, query):
        self.reply(int(arg), f"status {arg}".encode())

    def route_redirect(self, arg, query):
        self.reply(int(arg), headers=[("Location", query["to"][0])])

    def route_loop(self, arg, query):
        self.reply(302, headers=[("Location", "/loop")])

    def route_sleep(self, arg, query):
        time.sleep(float(arg))
        self.reply(200, b"late")

    def route_drip_body(self, arg, query):
        self.send_response(200)
        self.send_header("Content-Length", "1000")
        self.end_headers()
        self.drip(b"x" * 1000)

    def route_drip_headers(self, arg, query):
        self.wfile.write(b"HTTP/1.1 200 OK\r\n")
        self.drip(b"X-Slow: " + b"y" * 1000 + b"\r\n\r\n")

    def drip(self, data):
        for byte in data:
            try:
                self.wfile.write(bytes([byte]))
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.05)

    def route_big(self, arg, query):
        self.reply(200, b"x" * int(arg))

    def route_chunked(self, arg, query):
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for piece in (b"first ", b"second ", b"third"):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
        self.wfile.write(b"0\r\n\r\n")

    def route_set_cookie(self, arg, query):
        self.reply(200, b"cookie set", [("Set-Cookie", "session=secret; Path=/")])

    def route_json(self, arg, query):
        self.reply(200, b'{"status": "ok"}', [("Content-Type", "application/json")])


class QuietHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request, client_address):
        pass  # clients hanging up on slow routes is what the tests do


class Server:
    def __init__(self, host="127.0.0.1", tls_context=None):
        self.httpd = QuietHTTPServer((host, 0), Handler)
        self.httpd.received = []
        if tls_context is not None:
            self.httpd.socket = tls_context.wrap_socket(self.httpd.socket, server_side=True)
        self.host, self.port = host, self.httpd.server_port
        self.scheme = "https" if tls_context else "http"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def received(self):
        return self.httpd.received

    def url(self, path="/ok", host=None):
        return f"{self.scheme}://{host or self.host}:{self.port}{path}"

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def server():
    srv = Server("127.0.0.1")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def server_two():
    srv = Server("127.0.0.2")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def server_three():
    srv = Server("127.0.0.3")
    yield srv
    srv.stop()


@pytest.fixture(autouse=True)
def _clear_records(request):
    for name in ("server", "server_two", "server_three"):
        if name in request.fixturenames:
            request.getfixturevalue(name).received.clear()


@pytest.fixture(scope="module")
def session():
    return make_session(LOOPBACK)


def prepared(url, *, method="GET", headers=None, body=b"", timeout=5.0, connect_timeout=2.0,
             follow_redirects=False, max_redirects=5):
    return PreparedDelivery(method=method, url=url, headers=headers or {}, body=body,
                            connect_timeout=connect_timeout, timeout=timeout,
                            follow_redirects=follow_redirects, max_redirects=max_redirects)


def send(url, session, policy=LOOPBACK, **kwargs):
    max_body_bytes = kwargs.pop("max_body_bytes", 16384)
    return deliver(prepared(url, **kwargs), session=session, policy=policy,
                   max_body_bytes=max_body_bytes)


# --- outcome classes ------------------------------------------------------------------

def test_2xx_reports_status_headers_body_and_the_address_connected_to(server, session):
    result = send(server.url("/ok"), session)
    assert result.status_code == 200
    assert result.error_kind is None and result.error_message is None
    assert result.body_excerpt == "hello" and not result.body_truncated
    assert result.headers["content-type"] == "text/plain; charset=utf-8"
    assert result.remote_addr == "127.0.0.1"
    assert result.final_url == server.url("/ok")
    assert result.duration_ms > 0
    assert classify(result, SuccessCriteria()).succeeded


def test_3xx_is_reported_as_is_when_redirects_are_not_followed(server, session):
    result = send(server.url("/redirect/302?to=/ok"), session)
    assert result.status_code == 302
    assert result.headers["location"] == "/ok"
    assert [r["path"] for r in server.received] == ["/redirect/302"]
    assert classify(result, SuccessCriteria()).error_kind == "http_3xx"
    assert classify(result, SuccessCriteria(accept_redirect_status=True)).succeeded


def test_3xx_is_followed_to_the_final_response(server, session):
    result = send(server.url("/redirect/301?to=/ok"), session, follow_redirects=True)
    assert result.status_code == 200 and result.body_excerpt == "hello"
    assert result.final_url == server.url("/ok")
    assert [r["path"] for r in server.received] == ["/redirect/301", "/ok"]


def test_303_turns_a_post_into_a_get_and_307_keeps_it(server, session):
    send(server.url("/redirect/303?to=/ok"), session, method="POST", body=b"payload",
         headers={"Content-Type": "text/plain"}, follow_redirects=True)
    send(server.url("/redirect/307?to=/ok"), session, method="POST", body=b"payload",
         follow_redirects=True)
    hops = [(r["method"], r["path"], r["body"]) for r in server.received]
    assert hops == [
        ("POST", "/redirect/303", b"payload"), ("GET", "/ok", b""),
        ("POST", "/redirect/307", b"payload"), ("POST", "/ok", b"payload"),
    ]
    assert "Content-Type" not in server.received[1]["headers"]


def test_redirects_stop_at_max_redirects(server, session):
    result = send(server.url("/loop"), session, follow_redirects=True, max_redirects=2)
    assert result.status_code == 302
    assert len(server.received) == 3  # the first request and two redirects
    assert classify(result, SuccessCriteria()).error_kind == "http_3xx"


def test_authorization_is_not_forwarded_to_another_host(server_two, server_three, session):
    target = server_three.url("/ok")
    result = send(server_two.url(f"/redirect/302?to={target}"), session, follow_redirects=True,
                  headers={"Authorization": "Bearer secret", "X-Other": "kept"})
    assert result.status_code == 200 and result.remote_addr == "127.0.0.3"
    assert server_two.received[0]["headers"]["Authorization"] == "Bearer secret"
    assert "Authorization" not in server_three.received[0]["headers"]
    assert server_three.received[0]["headers"]["X-Other"] == "kept"


@pytest.mark.parametrize("status, kind", [(404, "http_4xx"), (429, "http_4xx"),
                                          (500, "http_5xx"), (503, "http_5xx")])
def test_4xx_and_5xx(server, session, status, kind):
    result = send(server.url(f"/status/{status}"), session)
    assert result.status_code == status and result.error_kind is None
    assert result.body_excerpt == f"status {status}"
    outcome = classify(result, SuccessCriteria())
    assert (outcome.succeeded, outcome.error_kind) == (False, kind)


def test_head_request(server, session):
    result = send(server.url("/ok"), session, method="HEAD")
    assert result.status_code == 200 and result.body_excerpt == ""


def test_chunked_body(server, session):
    assert send(server.url("/chunked"), session).body_excerpt == "first second third"


# --- the total deadline ------------------------------------------------------------------

def test_timeout_when_the_server_answers_too_late(server, session):
    started = time.monotonic()
    result = send(server.url("/sleep/3"), session, timeout=0.5)
    elapsed = time.monotonic() - started
    assert result.error_kind == "timeout" and result.status_code is None
    assert 0.45 < elapsed < 1.0
    assert classify(result, SuccessCriteria()).error_kind == "timeout"


def test_a_slow_drip_body_cannot_outlast_the_total_timeout(server, session):
    # 1000 bytes at one per 50 ms: every read is quick, the whole would take 50 s.
    started = time.monotonic()
    result = send(server.url("/drip-body"), session, timeout=1.0)
    elapsed = time.monotonic() - started
    assert result.error_kind == "timeout"
    assert result.status_code == 200  # the headers did arrive
    assert 0.95 < elapsed < 1.5
    assert not classify(result, SuccessCriteria()).succeeded


def test_slow_drip_headers_cannot_outlast_the_total_timeout(server, session):
    started = time.monotonic()
    result = send(server.url("/drip-headers"), session, timeout=1.0)
    assert result.error_kind == "timeout" and result.status_code is None
    assert time.monotonic() - started < 1.5


@pytest.fixture
def silent_listener():
    """Accepts TCP connections and never says a word (a TLS handshake that never ends)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    accepted = []

    def accept_forever():
        try:
            while True:
                accepted.append(sock.accept()[0])
        except OSError:
            pass  # closed at teardown

    threading.Thread(target=accept_forever, daemon=True).start()
    yield sock.getsockname()[1]
    sock.close()
    for conn in accepted:
        conn.close()


@pytest.mark.parametrize("connect_timeout, timeout", [(5.0, 0.5), (0.3, 5.0)])
def test_a_stalled_tls_handshake_is_a_connect_error_within_the_deadline(
        silent_listener, session, connect_timeout, timeout):
    # Nothing was sent, so it is as safe to retry as a refused connection.
    started = time.monotonic()
    result = send(f"https://127.0.0.1:{silent_listener}/", session,
                  connect_timeout=connect_timeout, timeout=timeout)
    assert result.error_kind == "connect_error"
    assert "connecting" in result.error_message
    assert time.monotonic() - started < min(connect_timeout, timeout) + 0.4


def test_the_session_still_works_after_a_deadline_killed_a_connection(server, session):
    send(server.url("/drip-body"), session, timeout=0.3)
    assert send(server.url("/ok"), session).status_code == 200


# --- connection failures ------------------------------------------------------------------

def _closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_connection_refused_on_a_closed_port(session):
    result = send(f"http://127.0.0.1:{_closed_port()}/", session)
    assert result.error_kind == "connect_error" and result.status_code is None
    assert "refused" in result.error_message.lower()


def test_dns_failure(session):
    result = send("http://no-such-host.invalid/", session)
    assert result.error_kind == "dns_error"
    assert classify(result, SuccessCriteria()).error_kind == "dns_error"


def test_tls_error_speaking_https_to_a_plain_http_port(server, session):
    result = send(server.url("/ok").replace("http://", "https://"), session)
    assert result.error_kind == "tls_error"


@pytest.fixture
def answering_garbage():
    """Reads the request, then answers ``answer`` (bytes that are not valid HTTP) and closes;
    records what it received."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    state = {"answer": b"", "received": []}

    def serve():
        try:
            while True:
                conn, _ = sock.accept()
                with conn:
                    state["received"].append(conn.recv(65536))
                    conn.sendall(state["answer"])
        except OSError:
            pass  # closed at teardown

    threading.Thread(target=serve, daemon=True).start()
    yield sock.getsockname()[1], state
    sock.close()


@pytest.mark.parametrize("answer", [
    b"HTTP/1.1 2\xff0 OK\r\nContent-Length: 2\r\n\r\nok",        # a bad status line
    b"HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 2\r\n\r\nok",  # a NUL in a header
    b"SSH-2.0-OpenSSH_9.2\r\n",                                      # not HTTP at all
])
def test_an_answer_that_is_not_http_is_an_invalid_response_not_a_connect_error(answering_garbage, session,
                                                                               answer):
    """The request went out and the endpoint answered: the history must not say the
    connection failed (connect_error: nothing sent, not metered), but what came back."""
    port, state = answering_garbage
    state["answer"] = answer
    result = send(f"http://127.0.0.1:{port}/hook", session)
    assert state["received"] and state["received"][-1].startswith(b"GET /hook HTTP/1.1")
    assert result.status_code is None and result.error_kind == "invalid_response", result.error_message
    assert "not valid HTTP" in result.error_message
    assert request_started(result.error_kind)  # metered: the request left (docs/billing.md)
    outcome = classify(result, SuccessCriteria())
    assert outcome.error_kind == "invalid_response" and not outcome.succeeded
    assert should_retry(outcome, None, 1, RetryPolicy())  # as a 5xx: the endpoint may mend


# --- TLS -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1)).not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([
            x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    directory = tmp_path_factory.mktemp("tls")
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


@pytest.fixture(scope="module")
def tls_server(tls_files):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*tls_files)
    srv = Server("127.0.0.1", tls_context=context)
    yield srv
    srv.stop()


def test_https_with_a_trusted_certificate_checks_the_host_name(tls_server, tls_files):
    trusted = make_session(LOOPBACK, ca_bundle=tls_files[0])
    result = send(tls_server.url("/ok", host="localhost"), trusted)
    assert result.status_code == 200 and result.body_excerpt == "hello"
    assert result.remote_addr == "127.0.0.1"
    again = send(tls_server.url("/ok", host="localhost"), trusted)
    assert again.status_code == 200


def test_tls_error_on_an_untrusted_certificate(tls_server):
    result = send(tls_server.url("/ok", host="localhost"), make_session(LOOPBACK))
    assert result.error_kind == "tls_error"
    assert "certificate" in result.error_message.lower()


# --- the address guard on real connections ------------------------------------------------

def test_the_default_policy_refuses_a_loopback_literal_without_connecting(server):
    result = send(server.url("/ok"), make_session(AddressPolicy()), policy=AddressPolicy())
    assert result.error_kind == "forbidden_target"
    assert "loopback" in result.error_message
    assert server.received == []


def test_a_host_name_resolving_to_a_private_address_is_refused_at_connect_time(server):
    # check_url cannot know where "localhost" leads; the connection does.
    result = send(server.url("/ok", host="localhost"), make_session(AddressPolicy()),
                  policy=AddressPolicy())
    assert result.error_kind == "forbidden_target"
    assert "localhost (127.0.0.1) is a loopback address" in result.error_message
    assert server.received == []
    assert classify(result, SuccessCriteria()).error_kind == "forbidden_target"


def test_a_redirect_from_an_allowed_target_to_a_forbidden_one_is_refused(server, server_two):
    session = make_session(ONLY_127_0_0_2)
    assert send(server_two.url("/ok"), session, policy=ONLY_127_0_0_2).status_code == 200
    result = send(server_two.url(f"/redirect/302?to={server.url('/ok')}"), session,
                  policy=ONLY_127_0_0_2, follow_redirects=True)
    assert result.error_kind == "forbidden_target"
    assert server.received == []


def test_a_redirect_to_a_name_resolving_to_a_forbidden_address_is_refused(server, server_two):
    session = make_session(ONLY_127_0_0_2)
    target = server.url("/ok", host="localhost")
    result = send(server_two.url(f"/redirect/307?to={target}"), session,
                  policy=ONLY_127_0_0_2, follow_redirects=True)
    assert result.error_kind == "forbidden_target"
    assert server.received == []


def test_the_adapter_refuses_even_when_the_url_check_is_skipped(server):
    # Deliver with a permissive URL policy but a strict session: the connection-time check
    # alone must hold.
    result = send(server.url("/ok"), make_session(AddressPolicy()), policy=LOOPBACK)
    assert result.error_kind == "forbidden_target"
    assert server.received == []


@pytest.mark.parametrize("location", ["ftp://127.0.0.2/file", "http://127.0.0.2:22/",
                                      "http://user:pw@127.0.0.2/"])
def test_a_redirect_to_a_refused_scheme_port_or_userinfo(server_two, session, location):
    result = send(server_two.url(f"/redirect/302?to={location}"), session, follow_redirects=True)
    assert result.error_kind == "forbidden_target"


def test_environment_proxies_are_ignored(server, monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    assert send(server.url("/ok"), make_session(LOOPBACK)).status_code == 200


# --- body capture and connection reuse ----------------------------------------------------

def test_a_long_body_is_truncated_not_failed(server, session):
    result = send(server.url("/big/100000"), session, max_body_bytes=1000)
    assert result.status_code == 200 and result.error_kind is None
    assert result.body_truncated and result.body_excerpt == "x" * 1000


def test_a_body_of_exactly_the_limit_is_not_truncated(server, session):
    result = send(server.url("/big/1000"), session, max_body_bytes=1000)
    assert not result.body_truncated and len(result.body_excerpt) == 1000


def test_connections_are_reused_across_deliveries(server):
    session = make_session(LOOPBACK)
    for _ in range(3):
        assert send(server.url("/ok"), session).status_code == 200
    assert len({r["client_port"] for r in server.received}) == 1


def test_a_truncated_body_does_not_poison_the_pool(server):
    session = make_session(LOOPBACK)
    send(server.url("/big/100000"), session, max_body_bytes=10)
    assert send(server.url("/ok"), session).body_excerpt == "hello"


def test_cookies_never_travel_between_deliveries(server, session):
    send(server.url("/set-cookie"), session)
    send(server.url("/ok"), session)
    assert "Cookie" not in server.received[1]["headers"]


def test_a_body_criterion_on_a_real_response(server, session):
    result = send(server.url("/json"), session)
    assert classify(result, SuccessCriteria(body_regex=r'"status":\s*"ok"')).succeeded
    outcome = classify(result, SuccessCriteria(body_contains='"degraded"'))
    assert outcome.error_kind == "body_mismatch"


# --- a prepared, signed request end to end ----------------------------------------------------

def _stdlib_verify(secret, headers, body):
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(hmac.compare_digest(part.removeprefix("v1,"), expected)
               for part in headers["webhook-signature"].split())


def test_a_signed_json_delivery_verifies_at_the_receiver(server, session):
    old, new = generate_secret(), generate_secret()
    scheduled = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
    spec = RequestSpec(url=server.url("/ok"), method="POST", body_format="json",
                       body='{"job": "{{ job.name }}", "attempt": {{ attempt }}}',
                       headers={"X-Team": "ops"})
    for attempt in (1, 2):
        variables = standard_variables(job_id=7, job_name='say "hi"', execution_id="ex-1",
                                       scheduled_for=scheduled, attempt=attempt,
                                       now=dt.datetime.now(dt.timezone.utc))
        request = prepare(spec, variables=variables, job_id=7, execution_id="ex-1",
                          attempt=attempt, scheduled_for=scheduled, signing_secrets=[old, new],
                          timestamp=int(time.time()), version="1.2.3")
        assert deliver(request, session=session, policy=LOOPBACK).status_code == 200

    first, second = server.received
    for received in (first, second):
        headers = {k.lower(): v for k, v in received["headers"].items()}
        for secret in (old, new):
            Webhook(secret).verify(received["body"], headers, json_parse=False)  # raises if bad
            assert _stdlib_verify(secret, headers, received["body"])
        assert headers["user-agent"] == "cronsvc/1.2.3"
        assert headers["content-type"] == "application/json"
        assert headers["x-team"] == "ops"
    assert json.loads(first["body"]) == {"job": 'say "hi"', "attempt": 1}
    assert json.loads(second["body"]) == {"job": 'say "hi"', "attempt": 2}
    assert first["headers"]["webhook-id"] == second["headers"]["webhook-id"] == "ex-1"
    assert first["headers"]["X-Cronsvc-Attempt"] == "1" and second["headers"]["X-Cronsvc-Attempt"] == "2"


def test_concurrent_deliveries_share_one_session(server, session):
    results = []

    def worker():
        results.append(send(server.url("/ok"), session).status_code)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [200] * 8
