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

``prepared_cursor()`` is for the hand-written statements of the API's hot paths
(``apps.sql.rows``): each is prepared on the connection the first time it runs there, so
PostgreSQL parses and plans it once per connection instead of on every request (planning the
job read cost more than running it: bench/README.md, "Figures behind the code"). Django's own
cursors bind on the client and prepare nothing, as Django chooses by default.
DATABASE_PREPARED_STATEMENTS=false turns this off, for a connection pooler that cannot keep
prepared statements (PgBouncer in transaction mode before 1.21):
DATABASE_TRANSACTION_POOLING=true makes it the default.
"""

import select
import sys

from django.conf import settings
from django.db.backends.postgresql import base, operations
import psycopg
from psycopg import pq


class PreparingCursor(base.ServerBindingCursor):
    """Binds on the server and prepares every statement it executes."""

    def execute(self, query, params=None, *, prepare=True, binary=None):
        return super().execute(query, params, prepare=prepare, binary=binary)


class DatabaseOperations(operations.DatabaseOperations):
    def last_executed_query(self, cursor, sql, params):
        # The query as logged (DEBUG, tests): composed on the client, as Django composes it
        # for its own server-binding cursors; psycopg keeps no text of a prepared execution.
        if isinstance(cursor, PreparingCursor):
            try:
                return self.compose_sql(sql, params)
            except psycopg.errors.DataError:
                return None
        return super().last_executed_query(cursor, sql, params)


class DatabaseWrapper(base.DatabaseWrapper):
    ops_class = DatabaseOperations

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

    def get_connection_params(self):
        params = super().get_connection_params()
        if not settings.DATABASE_PREPARED_STATEMENTS:
            # While it is None psycopg prepares nothing, even when asked (prepare=True): a
            # pooler's next transaction may run on a session that never saw the statement,
            # or one where another client prepared the same name (_pg3_0) first.
            params["prepare_threshold"] = None
        elif params.get("prepare_threshold") is None:
            # Django's cursors bind on the client and never prepare, so with it set only
            # PreparingCursor's statements are prepared.
            params["prepare_threshold"] = sys.maxsize
        return params

    def prepared_cursor(self):
        """A cursor like ``cursor()`` whose statements are prepared (see the module's docstring)."""
        if not settings.DATABASE_PREPARED_STATEMENTS:
            return self.cursor()
        # cursor()'s own steps (BaseDatabaseWrapper._cursor) with this cursor class: the
        # health check, the connection, and the wrapper that logs queries (tests, DEBUG).
        self.close_if_health_check_failed()
        self.ensure_connection()
        with self.wrap_database_errors:
            return self._prepare_cursor(PreparingCursor(self.connection))
