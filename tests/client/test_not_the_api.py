"""The command pointed at something that is not cronsvc: a web site, another JSON API, a port
nothing listens on, a server that never answers, a port that speaks neither HTTP nor TLS.
Every time: exit code 5 and one sentence on stderr that names the URL and what was wrong,
never a traceback."""

import datetime
import json
import socket
import ssl
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from ipaddress import IPv4Address

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.client.conftest import Cli
from tests.support.processes import free_port

pytestmark = pytest.mark.slow

KEY = "csk_live_whatever"


@contextmanager
def answering(status, content_type, body):
    """An HTTP server answering every request with the same status, type and body."""

    class Handler(BaseHTTPRequestHandler):
        def answer(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PATCH = do_DELETE = answer

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def listening(on_connection=None):
    """A TCP port that accepts connections; ``on_connection(socket)`` for each, else the
    connections wait in the backlog unanswered."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            with connection:
                on_connection(connection)

    if on_connection:
        threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()


def speak_garbage(connection):
    connection.settimeout(5)
    try:
        connection.recv(4096)
        connection.sendall(b"\x00\x17garbage \xff\xfe not a protocol at all\r\n\r\n")
    except OSError:
        pass


def self_signed_certificate(directory):
    """A certificate for 127.0.0.1 signed by its own key: (certificate file, key file)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                   .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
                   .not_valid_after(now + datetime.timedelta(hours=1))
                   .add_extension(x509.SubjectAlternativeName([x509.IPAddress(IPv4Address("127.0.0.1"))]), False)
                   .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                   .sign(key, hashes.SHA256()))
    cert_file, key_file = directory / "cert.pem", directory / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


def one_sentence(result, url, *phrases):
    """Exit 5 and a single line on stderr naming ``url`` and each of ``phrases``."""
    assert result.code == 5, (result.code, result.err)
    assert "Traceback" not in result.err
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith(f"Error: {url}") or lines[0].startswith(f"Error: Could not reach {url}"), lines[0]
    for phrase in phrases:
        assert phrase in lines[0], (phrase, lines[0])
    return lines[0]


@pytest.mark.parametrize("status, content_type, body, args, phrases", [
    (200, "text/html", b"<html><body>Welcome to nginx!</body></html>", ("jobs", "list"),
     ["GET /api/v1/jobs/ answered HTTP 200 with text/html, not JSON"]),
    (200, "text/html; charset=utf-8", b"<html>hello</html>", ("jobs", "show", "1"),
     ["text/html, not JSON"]),
    (200, "text/html", b"<html>hello</html>",
     ("jobs", "create", "--name", "x", "--every", "60", "--url", "https://example.com/"),
     ["POST /api/v1/jobs/ answered HTTP 200 with text/html"]),
    (200, "application/json", b'{"hello": 1}', ("jobs", "list"),
     ["answered a JSON object without 'results'"]),
    (200, "application/json", b'{"hello": 1}', ("jobs", "show", "1"),
     ["answered a JSON object without 'id'"]),
    (200, "application/json", b'{"results": [{"hello": 1}]}', ("monitors", "list"),
     ["GET /api/v1/monitors/ answered a JSON object without 'id'"]),
    (200, "application/json", b'{"id": 1, "created_at": "yesterday"}', ("jobs", "show", "1"),
     ["GET /api/v1/jobs/1/ answered a job the client cannot read (ValueError"]),
    (200, "application/json", b'{"results": [{"id": 1, "next_run_at": 7}]}', ("jobs", "list"),
     ["GET /api/v1/jobs/ answered a job the client cannot read"]),
    (200, "application/json", b'{"results": "none"}', ("projects", "list"),
     ["whose 'results' is a string"]),
    (200, "application/json", b"[1, 2, 3]", ("projects", "list"),
     ["answered a JSON list, not an object"]),
    (200, "application/json", b"[1, 2, 3]", ("next-runs", "1"),
     ["answered a JSON list, not an object"]),
    (200, "application/json", b"{not json", ("jobs", "list"),
     ["not valid JSON"]),
    (200, "application/json", b"", ("jobs", "list"), ["with nothing"]),
    (404, "text/html", b"<h1>Not Found</h1>", ("jobs", "show", "1"),
     ["answered HTTP 404 (text/html) without the API's error object"]),
    (404, "application/json", b'{"detail": "Not found."}', ("jobs", "list"),
     ["HTTP 404 (application/json) without the API's error object"]),
    (405, "text/html", b"<h1>Method Not Allowed</h1>", ("jobs", "pause", "1"),
     ["POST /api/v1/jobs/1/pause/ answered HTTP 405"]),
])
def test_an_answer_that_is_not_the_api_exits_5_with_one_sentence(cronsvc_home, status, content_type, body, args,
                                                                  phrases):
    with answering(status, content_type, body) as url:
        one_sentence(Cli(cronsvc_home, url, KEY)(*args), url, "does not look like a cronsvc API: ", *phrases)


def test_the_api_error_object_on_a_4xx_still_exits_as_the_api_says(cronsvc_home):
    """What tells the API's 4xx answers apart is its error object, not the status."""
    envelope = json.dumps({"error": {"code": "not_found", "message": "No such job.", "fields": {}}}).encode()
    with answering(404, "application/json", envelope) as url:
        result = Cli(cronsvc_home, url, KEY)("jobs", "show", "1")
    assert result.code == 4 and result.err.strip() == "Error: not_found (HTTP 404): No such job."


def test_a_port_nothing_listens_on(cronsvc_home):
    url = f"http://127.0.0.1:{free_port()}"
    one_sentence(Cli(cronsvc_home, url, KEY)("jobs", "list"), url, "the connection was refused")


def test_a_server_that_accepts_and_never_answers(cronsvc_home):
    with listening() as port:
        url = f"http://127.0.0.1:{port}"
        result = Cli(cronsvc_home, url, KEY)("--timeout", "1", "jobs", "list", timeout=30)
    one_sentence(result, url, "accepted the connection but did not answer within 1 s")


def test_a_port_that_does_not_speak_http(cronsvc_home):
    with listening(speak_garbage) as port:
        url = f"http://127.0.0.1:{port}"
        result = Cli(cronsvc_home, url, KEY)("--timeout", "5", "jobs", "list")
    one_sentence(result, url, "does not look like a cronsvc API: it did not answer in HTTP")


def test_an_https_url_on_a_port_that_does_not_speak_tls(cronsvc_home):
    with listening(speak_garbage) as port:
        url = f"https://127.0.0.1:{port}"
        result = Cli(cronsvc_home, url, KEY)("--timeout", "5", "jobs", "list")
    one_sentence(result, url, "the TLS handshake failed")


def test_a_url_that_is_not_http_is_a_usage_error(cronsvc_home):
    result = Cli(cronsvc_home, "localhost:8000", KEY)("jobs", "list")
    assert result.code == 2 and "Traceback" not in result.err
    assert result.err.strip() == ("Error: 'localhost:8000' is not a server URL: "
                                  "give one like https://cron.example.com")


@pytest.fixture
def tls_garbage(tmp_path):
    """A port that completes a TLS handshake (a self-signed certificate), then speaks garbage."""
    cert_file, key_file = self_signed_certificate(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)

    def handshake_then_garbage(connection):
        connection.settimeout(5)
        try:
            with context.wrap_socket(connection, server_side=True) as tls:
                speak_garbage(tls)
        except OSError:
            pass

    with listening(handshake_then_garbage) as port:
        yield f"https://127.0.0.1:{port}", cert_file


def test_a_tls_port_with_a_certificate_nobody_trusts(cronsvc_home, tls_garbage):
    url, _ = tls_garbage
    result = Cli(cronsvc_home, url, KEY)("--timeout", "5", "jobs", "list")
    one_sentence(result, url, "the TLS handshake failed (", "self-signed certificate")


def test_a_tls_port_speaking_garbage_once_trusted(cronsvc_home, tls_garbage):
    url, cert_file = tls_garbage
    result = Cli(cronsvc_home, url, KEY)("--timeout", "5", "jobs", "list", env={"REQUESTS_CA_BUNDLE": str(cert_file)})
    one_sentence(result, url, "does not look like a cronsvc API: it did not answer in HTTP")


def test_the_python_client_raises_not_the_api_with_the_same_sentence():
    from cronsvc_client import Client, NetworkError, NotTheApi

    with answering(200, "application/json", b'{"hello": 1}') as url:
        with pytest.raises(NotTheApi) as raised:
            Client(url, KEY).get_project("1")
    assert isinstance(raised.value, NetworkError) and raised.value.url == url
    assert str(raised.value) == (f"{url} does not look like a cronsvc API: GET /api/v1/projects/1/ answered "
                                 "a JSON object without 'id'.")
