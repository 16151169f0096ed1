"""The sandbox's side of outbound HTTP, and the byte relay the host's proxy uses too.

Run inside the sandbox, when a run may reach the network, as
`python3 -I -S -B /sandbox/forward.py PORT SOCKET -- PROGRAM...`: it listens on
127.0.0.1:PORT (the address HTTP_PROXY names), leaves a relay process behind that copies
each TCP connection to the Unix socket SOCKET (the run's egress proxy, cronsvc/sandbox/
egress.py, bound in from the host), and execs PROGRAM (the interpreter and the script) in
its own place, so the script keeps the pid whose exit code bwrap reports. The relay is a
child of the sandbox's init, not of the script (a shell's `wait` does not wait for it), and
dies with the sandbox when the script ends.

The relay gives the script nothing it does not have: it runs as the same user under the
same seccomp filter, and SOCKET is a socket the script can connect to itself. The guard is
the host's proxy. Standard library only, and nothing of cronsvc: it runs on the sandbox's
own /usr/bin/python3 (egress.py imports `Relay` from here, so both sides share one relay).
"""

import os
import selectors
import socket
import sys
import time

_CHUNK = 65536


class _End:
    """One socket of a pair, with the bytes waiting to be written to it."""

    def __init__(self, sock):
        sock.setblocking(False)
        self.sock = sock
        self.other = None
        self.pending = bytearray()
        self.reading = True  # its peer has not sent EOF yet
        self.shut = False  # nothing more will be written to it
        self.events = 0


class Relay:
    """Copies bytes both ways between pairs of sockets, in one thread. A side is read only
    once what it sent before has been written on, so a peer that does not read holds up
    its own connection and no other. EOF is passed on as a half-close; a pair ends when both
    directions are done, on an error, after `idle_seconds` with no byte either way, or when
    `account(n)` (called for every chunk read) returns False."""

    def __init__(self, idle_seconds=None, account=None):
        self.selector = selectors.DefaultSelector()
        self.idle_seconds = idle_seconds
        self.account = account
        self.pairs = {}  # first end -> time of the last byte either way
        self._listener = self._connect = None

    def add(self, a, b, to_b=b""):
        x, y = _End(a), _End(b)
        x.other, y.other = y, x
        y.pending += to_b
        self.pairs[x] = time.monotonic()
        self._update(x)
        self._update(y)

    def run(self):
        """Relay until every pair has ended."""
        while self.pairs:
            self._step()

    def serve(self, listener, connect):
        """Accept on `listener` forever, pairing each connection with `connect()`'s socket."""
        listener.setblocking(False)
        self._listener, self._connect = listener, connect
        self.selector.register(listener, selectors.EVENT_READ)
        while True:
            self._step()

    def _step(self):
        timeout = None
        if self.idle_seconds is not None and self.pairs:
            timeout = max(0.0, min(self.pairs.values()) + self.idle_seconds - time.monotonic())
        for key, events in self.selector.select(timeout):
            if key.data is None:
                self._accept()
            elif key.data.sock.fileno() != -1:  # not closed by an earlier event of this round
                self._transfer(key.data, events)
        if self.idle_seconds is not None:
            stale = time.monotonic() - self.idle_seconds
            for first in [first for first, last in self.pairs.items() if last <= stale]:
                self._close(first)

    def _accept(self):
        try:
            client, _ = self._listener.accept()
        except OSError:
            return
        try:
            upstream = self._connect()
        except OSError:
            client.close()
            return
        self.add(client, upstream)

    def _transfer(self, end, events):
        try:
            if events & selectors.EVENT_WRITE:
                del end.pending[:end.sock.send(end.pending)]
            if events & selectors.EVENT_READ:
                chunk = end.sock.recv(_CHUNK)
                if chunk and self.account is not None and self.account(len(chunk)) is False:
                    raise ConnectionAbortedError("byte limit")
                end.other.pending += chunk
                end.reading = bool(chunk)
            for side in (end, end.other):
                if not side.other.reading and not side.pending and not side.shut:
                    side.shut = True
                    side.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self._close(end)
            return
        if end.shut and end.other.shut:
            self._close(end)
            return
        self._touch(end)
        self._update(end)
        self._update(end.other)

    def _touch(self, end):
        first = end if end in self.pairs else end.other
        self.pairs[first] = time.monotonic()

    def _update(self, end):
        events = selectors.EVENT_WRITE if end.pending else 0
        if end.reading and not end.other.pending:
            events |= selectors.EVENT_READ
        if events == end.events:
            return
        if not end.events:
            self.selector.register(end.sock, events, end)
        elif not events:
            self.selector.unregister(end.sock)
        else:
            self.selector.modify(end.sock, events, end)
        end.events = events

    def _close(self, end):
        for side in (end, end.other):
            self.pairs.pop(side, None)
            if side.events:
                self.selector.unregister(side.sock)
                side.events = 0
            side.sock.close()


def _connect_unix(path):
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        raise
    return sock


def main(argv):
    port, path, separator, *program = argv[1:]
    if separator != "--" or not program:
        raise SystemExit("usage: forward.py PORT SOCKET -- PROGRAM...")
    listener = socket.create_server(("127.0.0.1", int(port)), backlog=64)
    if os.fork() == 0:
        if os.fork() == 0:  # the relay: orphaned at once, so the sandbox's init adopts it
            try:
                null = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(null, fd)
                Relay().serve(listener, lambda: _connect_unix(path))
            finally:
                os._exit(0)
        os._exit(0)
    os.wait()
    listener.close()
    os.execv(program[0], program)


if __name__ == "__main__":
    main(sys.argv)
