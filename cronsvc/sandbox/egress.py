"""The egress proxy of one script run: the only way out of a sandbox that may reach the
network (Network.HTTP). Host side, no Django.

The runner starts one per run, listening on a Unix socket in a directory of its own (owned
by the run's host user, mode 0700) that is bound into the sandbox; the sandbox's relay
(_forward.py) brings the script's connections to 127.0.0.1:PROXY_PORT here. It takes
absolute-form HTTP requests (`GET http://host/path HTTP/1.1`, sent on with `Connection:
close`) and `CONNECT host:443` tunnels. Before connecting, the target goes through the
platform's outbound address guard (cronsvc.delivery.guard) with the worker's policy: the
URL's host and port (check_url), then every address the name resolves to, and the
connection is made to a checked address (open_connection), so DNS rebinding gains nothing.
A refusal is a `403` with a plain-text reason and the header `X-Egress-Error: <code>`; a
request line that is not ASCII, or a host that is not a host name (guard.InvalidHost: give
an international name in its xn-- form, as curl and every HTTP library do), is a `400`
`egress_bad_request`.

Bounded per run (EgressRules): connections in total and at once, bytes relayed either way,
an idle timeout per connection, and the run itself: `close()` ends every connection.
"""

from __future__ import annotations

import http
import os
import shutil
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from cronsvc.delivery.guard import AddressPolicy, ForbiddenTarget, InvalidHost, check_url, open_connection

from ._forward import Relay

PROXY_PORT = 3128  # where HTTP_PROXY points inside the sandbox (its own loopback)
TUNNEL_PORTS = frozenset({443, 8443})
MAX_HEAD_BYTES = 64 * 1024
_CLOSE_GRACE = 2.0  # seconds close() waits for the run's connection threads, all together
_HOP_BY_HOP = frozenset({"connection", "proxy-connection", "keep-alive", "proxy-authorization",
                         "proxy-authenticate", "te", "trailer", "upgrade"})

# X-Egress-Error codes
FORBIDDEN = "egress_forbidden"  # the guard refused the target (403)
BAD_REQUEST = "egress_bad_request"  # not a proxy request this proxy serves (400, 405, 431)
LIMIT = "egress_limit"  # the run used its connections or bytes (429)
UNREACHABLE = "egress_unreachable"  # the name does not resolve or nothing accepts (502, 504)


@dataclass(frozen=True)
class EgressRules:
    """What one run's proxy lets through: the worker's address policy and the run's caps."""

    policy: AddressPolicy = field(default_factory=AddressPolicy)
    max_connections: int = 256  # per run, in total
    max_open: int = 16  # per run, at once
    max_bytes: int = 32 * 1024 * 1024  # per run, both ways, every connection together
    idle_seconds: float = 20.0  # a connection with no byte either way for this long is closed
    connect_seconds: float = 10.0
    tunnel_ports: frozenset[int] = TUNNEL_PORTS  # CONNECT gives raw TCP: HTTPS ports only


class Refused(Exception):
    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class EgressProxy:
    """Listening as soon as it is made; `close()` (or leaving the `with`) ends everything."""

    def __init__(self, rules: EgressRules, owner: int | None = None):
        self.rules = rules
        self.directory = tempfile.mkdtemp(prefix="cronsvc-egress-")
        self.socket_path = os.path.join(self.directory, "proxy.sock")
        self.connections = 0
        self.bytes = 0
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._listener.bind(self.socket_path)
            os.chmod(self.socket_path, 0o600)
            if owner is not None:  # the run's host user (bwrap binds the socket as that user)
                os.chown(self.socket_path, owner, owner)
                os.chown(self.directory, owner, owner)
            self._listener.listen(64)
        except BaseException:
            self._listener.close()
            shutil.rmtree(self.directory, ignore_errors=True)
            raise
        self._acceptor = threading.Thread(target=self._accept_loop, name="egress-accept", daemon=True)
        self._acceptor.start()

    def __enter__(self) -> EgressProxy:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets = list(self._open)
        for sock in (self._listener, *sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the threads blocked on them
            except OSError:
                pass
        deadline = time.monotonic() + _CLOSE_GRACE
        self._acceptor.join(_CLOSE_GRACE)
        self._listener.close()
        for thread in self._threads:  # one still resolving or connecting ends on its own
            thread.join(max(0.0, deadline - time.monotonic()))
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- the run's connections

    def _accept_loop(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                self._admit(client)
            except Refused as refusal:  # answered here: a refused run waits on itself only
                _answer(client, refusal, before_request=True)
                client.close()
                continue
            thread = threading.Thread(target=self._serve, args=(client,), name="egress", daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()

    def _admit(self, client: socket.socket) -> None:
        rules = self.rules
        with self._lock:
            if self._closed:
                raise Refused(429, LIMIT, "the run has ended")
            if self.connections >= rules.max_connections:
                raise Refused(429, LIMIT, f"a run may open at most {rules.max_connections} connections")
            if sum(1 for s in self._open if s.family == socket.AF_UNIX) >= rules.max_open:
                raise Refused(429, LIMIT, f"a run may hold at most {rules.max_open} connections at once")
            if self.bytes >= rules.max_bytes:
                raise Refused(429, LIMIT, f"the run has relayed its {rules.max_bytes} bytes")
            self.connections += 1
            self._open.add(client)

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        try:
            client.settimeout(self.rules.idle_seconds)
            head, rest = _read_head(client)
            method, target, version, headers = _parse(head)
            if method == "CONNECT":
                upstream = self._connect(*_tunnel_target(target, self.rules))
                client.sendall(f"{version} 200 Connection established\r\n\r\n".encode())
                to_upstream = rest
            else:
                host, port, request = _forwarded_request(method, target, version, headers, self.rules.policy)
                upstream = self._connect(host, port)
                to_upstream = request + rest
            relay = Relay(self.rules.idle_seconds, self._account)
            relay.add(client, upstream, to_upstream)
            relay.run()
        except Refused as refusal:
            _answer(client, refusal)
        except UnicodeError as exc:  # a name no encoder takes: the client's mistake, never this thread's end
            _answer(client, Refused(400, BAD_REQUEST, f"the host cannot be encoded ({exc})"))
        except OSError:
            pass  # the client went away or the run ended
        finally:
            with self._lock:
                self._open.discard(client)
                self._open.discard(upstream)
            client.close()
            if upstream is not None:
                upstream.close()

    def _connect(self, host: str, port: int) -> socket.socket:
        try:
            upstream, _ = open_connection(host, port, self.rules.policy, timeout=self.rules.connect_seconds)
        except ForbiddenTarget as exc:
            raise _refusal(exc) from None
        except socket.gaierror:
            raise Refused(502, UNREACHABLE, f"{host} does not resolve") from None
        except TimeoutError:
            raise Refused(504, UNREACHABLE, f"{host}:{port} did not accept in time") from None
        except OSError as exc:
            raise Refused(502, UNREACHABLE, f"{host}:{port} cannot be reached: {exc.strerror or exc}") from None
        with self._lock:
            if self._closed:
                upstream.close()
                raise OSError("the run has ended")
            self._open.add(upstream)
        return upstream

    def _account(self, size: int) -> bool:
        """Whether a chunk just read may go on: the one that crosses the cap does, then the
        connection ends (a run relays at most max_bytes plus one chunk)."""
        with self._lock:
            before, self.bytes = self.bytes, self.bytes + size
            return before < self.rules.max_bytes


def _read_head(client: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data and len(data) <= MAX_HEAD_BYTES:
        chunk = client.recv(65536)
        if not chunk:
            raise ConnectionResetError("the client closed before its request head ended")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    if len(head) > MAX_HEAD_BYTES:
        raise Refused(431, BAD_REQUEST, f"the request head is over {MAX_HEAD_BYTES} bytes")
    return head, rest


def _parse(head: bytes) -> tuple[str, str, str, list[tuple[str, str]]]:
    line, *lines = head.decode("latin-1").split("\r\n")
    if not line.isascii():
        raise Refused(400, BAD_REQUEST, "the request line is not ASCII (give a host name in its xn-- form)")
    parts = line.split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        raise Refused(400, BAD_REQUEST, "not an HTTP/1 request line")
    headers = []
    for header in lines:
        name, colon, value = header.partition(":")
        if not colon or not name or name != name.strip():
            raise Refused(400, BAD_REQUEST, "a malformed header line")
        headers.append((name, value.strip()))
    return parts[0].upper(), parts[1], parts[2], headers


def _tunnel_target(target: str, rules: EgressRules) -> tuple[str, int]:
    """`host:port` of a CONNECT, checked from its text alone (the addresses come next)."""
    host, colon, port = target.rpartition(":")
    if not colon or not host or not port.isdigit() or any(c in target for c in "/?#@"):
        raise Refused(400, BAD_REQUEST, "CONNECT takes host:port")
    if int(port) not in rules.tunnel_ports:
        ports = ", ".join(map(str, sorted(rules.tunnel_ports)))
        raise Refused(403, FORBIDDEN, f"CONNECT is only for HTTPS ports ({ports}), not {port}")
    checked = _guarded(f"https://{target}/", rules.policy)
    return checked.host, checked.port


def _forwarded_request(method: str, target: str, version: str, headers: list[tuple[str, str]],
                       policy: AddressPolicy) -> tuple[str, int, bytes]:
    """The host, port and origin-form request of an absolute-form one (`GET http://...`)."""
    try:
        parts = urlsplit(target)
    except ValueError:
        raise Refused(400, BAD_REQUEST, "the request target is not a URL") from None
    if parts.scheme.lower() == "https":
        raise Refused(400, BAD_REQUEST, "https goes through CONNECT (set HTTPS_PROXY)")
    if parts.scheme.lower() != "http" or not parts.netloc:
        raise Refused(400, BAD_REQUEST, "this is a proxy: send absolute-form requests (http://host/path)")
    checked = _guarded(f"http://{parts.netloc}/", policy)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    kept = [(n, v) for n, v in headers if n.lower() not in _HOP_BY_HOP]
    if not any(n.lower() == "host" for n, _ in kept):
        kept.insert(0, ("Host", parts.netloc))
    lines = [f"{method} {path} {version}", *(f"{n}: {v}" for n, v in kept), "Connection: close"]
    return checked.host, checked.port, ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _guarded(url: str, policy: AddressPolicy):
    try:
        return check_url(url, policy)
    except ForbiddenTarget as exc:
        raise _refusal(exc) from None


def _refusal(exc: ForbiddenTarget) -> Refused:
    """The guard's verdict as an answer: a host that is no host name is a malformed request
    (400), anything else the guard refuses is forbidden (403)."""
    if isinstance(exc, InvalidHost):
        return Refused(400, BAD_REQUEST, exc.reason)
    return Refused(403, FORBIDDEN, f"refused by the outbound address guard: {exc.reason}")


def _answer(client: socket.socket, refusal: Refused, before_request: bool = False) -> None:
    """Answer `refusal` and close gently: a socket closed while the client is still sending
    (or with its data unread) resets the connection, and the client may lose the answer.
    `before_request`: refused on arrival; the request is let in (and dropped) first."""
    body = f"cronsvc egress proxy: {refusal.message}\n".encode()
    head = (f"HTTP/1.1 {refusal.status} {http.HTTPStatus(refusal.status).phrase}\r\n"
            f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            f"X-Egress-Error: {refusal.code}\r\nConnection: close\r\n\r\n")
    try:
        client.settimeout(1)
        if before_request:
            try:
                _read_head(client)
            except Refused:
                pass
        client.sendall(head.encode() + body)
        client.shutdown(socket.SHUT_WR)
        client.settimeout(0.2)
        for _ in range(16):
            if not client.recv(65536):
                break
    except OSError:
        pass
