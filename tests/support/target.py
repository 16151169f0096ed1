"""A local HTTP server that records every request it receives: the customers' endpoint."""

import json
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


@dataclass
class Received:
    method: str
    path: str
    headers: dict
    body: bytes
    at: float


@dataclass
class Target:
    server: ThreadingHTTPServer
    received: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    flaky_counts: dict = field(default_factory=dict)
    #: (path, time.time()) of each /hang request whose client closed the connection
    hung_up: list = field(default_factory=list)

    @property
    def base_url(self):
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def url(self, path):
        return self.base_url + path

    def requests_to(self, path_prefix):
        with self.lock:
            return [r for r in self.received if r.path.startswith(path_prefix)]

    def hung_up_on(self, path_prefix):
        with self.lock:
            return [at for path, at in self.hung_up if path.startswith(path_prefix)]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    target: Target = None

    def log_message(self, *args):
        pass

    def _handle(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        with self.target.lock:
            self.target.received.append(
                Received(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.time())
            )
        if parts.path.startswith("/hang"):
            return self._hang(float(query.get("seconds", "60")))
        status, headers, payload = self._respond(parts.path, query)
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(payload)

    def _hang(self, seconds):
        """Answer nothing for ``seconds``, noting when the client closes the connection."""
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            readable, _, _ = select.select([self.connection], [], [], 0.05)
            if readable:
                try:
                    closed = self.connection.recv(1, socket.MSG_PEEK) == b""
                except OSError:
                    closed = True
                if closed:
                    with self.target.lock:
                        self.target.hung_up.append((self.path, time.time()))
                    self.close_connection = True
                    return
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _respond(self, path, query):
        if path.startswith("/status/"):
            return int(path.rsplit("/", 1)[1]), {}, b'{"ok": false}'
        if path.startswith("/slow"):
            time.sleep(float(query.get("seconds", "1")))
            return 200, {}, b"slow ok"
        if path.startswith("/retry-after"):
            return 429, {"Retry-After": query.get("seconds", "7")}, b"slow down"
        if path.startswith("/flaky"):
            # fails `fail` times for each key, then succeeds
            key = query.get("key", "")
            with self.target.lock:
                count = self.target.flaky_counts.get(key, 0) + 1
                self.target.flaky_counts[key] = count
            if count <= int(query.get("fail", "1")):
                return 503, {}, b"not yet"
            return 200, {}, b"finally"
        if path.startswith("/set-cookie"):
            return 200, {"Set-Cookie": "session=s3cr3t-cookie; HttpOnly", "X-Request-Id": "r-1"}, b"ok"
        if path.startswith("/odd-bytes"):
            # what a legacy or binary endpoint sends: a header byte that is not UTF-8 (the
            # handler writes headers in Latin-1) and a body with NUL and invalid UTF-8 bytes
            return 200, {"Content-Disposition": "attachment; filename=caf\u00e9.txt", "X-Ok": "plain"}, \
                b"bin\x00ary\xff end"
        if path.startswith("/big"):
            return 200, {"Content-Type": "text/plain"}, b"x" * int(query.get("bytes", "100000"))
        return 200, {"Content-Type": "application/json"}, json.dumps({"ok": True, "path": path}).encode()

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = _handle


class _Server(ThreadingHTTPServer):
    # socketserver's default backlog of 5 drops connections when two workers open hundreds at
    # once; a dropped SYN is retried after 1 s, 3 s... and can outlast the connect timeout.
    request_queue_size = 1024


def start_target(host="127.0.0.1"):
    target = Target(server=None)
    handler = type("Handler", (_Handler,), {"target": target})
    target.server = _Server((host, 0), handler)
    target.server.daemon_threads = True
    threading.Thread(target=target.server.serve_forever, daemon=True).start()
    return target
