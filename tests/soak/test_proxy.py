"""The soak's fault proxy (soak/proxy.py), against a real echo server: it forwards, a cut
resets every connection, a blackhole accepts and forwards nothing until it ends."""

import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time

import pytest

from soak.platform import ROOT


class _Echo(socketserver.BaseRequestHandler):
    def handle(self):
        try:
            while data := self.request.recv(4096):
                self.request.sendall(data)
        except OSError:  # the proxy reset it
            pass


@pytest.fixture
def proxy():
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    popen = subprocess.Popen([sys.executable, "-m", "soak.proxy", str(server.server_address[1])], cwd=ROOT,
                             stdout=subprocess.PIPE, text=True)
    port = int(popen.stdout.readline())
    yield popen, port
    popen.terminate()
    popen.wait(10)
    server.shutdown()


def connect(port):
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.settimeout(2)
    return sock


def echo(sock, payload=b"ping"):
    sock.sendall(payload)
    return sock.recv(4096)


def assert_reset(sock):
    """The proxy closed it: ECONNRESET, or the peer gone on the next write."""
    with pytest.raises(OSError):
        for _ in range(20):
            if not echo(sock):
                raise ConnectionResetError("closed")
            time.sleep(0.05)


def test_it_forwards_and_a_cut_resets_every_connection(proxy):
    popen, port = proxy
    first, second = connect(port), connect(port)
    assert echo(first) == b"ping"
    assert echo(second, b"pong") == b"pong"
    popen.send_signal(signal.SIGUSR1)
    for sock in (first, second):
        assert_reset(sock)
    assert echo(connect(port)) == b"ping"  # new connections pass again


def test_a_blackhole_accepts_never_forwards_and_its_end_resets_what_it_held(proxy):
    popen, port = proxy
    before = connect(port)
    assert echo(before) == b"ping"
    popen.send_signal(signal.SIGUSR2)
    time.sleep(0.3)
    during = connect(port)  # accepted...
    for sock in (before, during):
        with pytest.raises(socket.timeout):  # ...and never answered
            echo(sock)
    popen.send_signal(signal.SIGHUP)
    time.sleep(0.3)
    for sock in (before, during):
        assert_reset(sock)
    assert echo(connect(port)) == b"ping"
