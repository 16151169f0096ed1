"""Django's PostgreSQL backend with a health check that costs no round trip.

With CONN_HEALTH_CHECKS (on in server mode) Django checks a reused connection at the start
of every request by running ``SELECT 1``: a third of the round trips of a job read through
the API. A connection the server has closed (restart, pg_terminate_backend, an idle
timeout) has already said so on its socket: PostgreSQL sends the session's FATAL error and
closes it, so the socket turns readable while it should be silent between statements. The
check here asks the kernel, without blocking, whether the socket has anything to read (or is
closed); psycopg's own state catches a connection it already knows is broken.

What neither check can see in advance (a server that vanished without closing, a network
cut) fails the request's first query, and Django then closes the connection at the end of
that request, as it does with SELECT 1 (which would hang there instead).
"""

import select

from django.db.backends.postgresql import base
import psycopg
from psycopg import pq


class DatabaseWrapper(base.DatabaseWrapper):
    def is_usable(self):
        if self.connection is None:
            return False
        pgconn = self.connection.pgconn
        if pgconn.status != pq.ConnStatus.OK:
            return False
        try:
            poller = select.poll()
            poller.register(pgconn.socket, select.POLLIN | select.POLLPRI)
            return not poller.poll(0)  # anything to read between statements: an error or EOF
        except (OSError, ValueError, psycopg.Error):  # no socket any more
            return False
