"""A TCP port that accepts and never answers: a blackholed or stalled PostgreSQL, Redis or
broker, as the processes see it (their connect succeeds, their reads wait)."""

import socket
import threading


class Blackhole:
    """A TCP port that accepts every connection, reads what is sent and answers nothing."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.connections = []
        self.stopping = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._swallow, args=(conn,), daemon=True).start()

    @staticmethod
    def _swallow(conn):
        try:
            while conn.recv(65536):
                pass
        except OSError:
            pass

    def close(self):
        self.stopping = True
        self.sock.close()
        for conn in self.connections:
            conn.close()
