"""A real PgBouncer (Debian's, installed by `make pgbouncer`) in transaction pooling mode in
front of the test PostgreSQL, for the tests of DATABASE_TRANSACTION_POOLING
(docs/operations.md, "Behind PgBouncer").

Its pool is small (``pool_size`` server connections per database and user) so that the
processes' client connections really share server sessions: what one client leaves on a
session (a prepared statement, a session SET, an advisory lock) meets the next one.
"""

import os
import shutil
import socket
import tempfile
from contextlib import contextmanager
from pathlib import Path

from django.db import connection

from tests.support.processes import Process, free_port, wait_for

BINARY = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"

INI = """\
[databases]
; every database name, forwarded to the test PostgreSQL as the same name
* = host={host} port={port} user={user}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {listen_port}
unix_socket_dir =
auth_type = any
pool_mode = transaction
default_pool_size = {pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 500
; what cronsvc needs of a transaction-mode PgBouncer: nothing more (docs/operations.md)
"""


class PgBouncer:
    def __init__(self, process, port, folder):
        self.process = process
        self.port = port
        self.folder = folder

    def url(self, database=None):
        """The test database's URL through this PgBouncer."""
        s = connection.settings_dict
        return f"postgres://{s['USER'] or 'postgres'}@127.0.0.1:{self.port}/{database or s['NAME']}"

    def output(self):
        return self.process.output()


@contextmanager
def running_pgbouncer(pool_size=2):
    """PgBouncer on a free port, pool_mode=transaction, ``pool_size`` server connections."""
    if not os.path.exists(BINARY):
        raise AssertionError("pgbouncer is not installed: run `make pgbouncer` (Debian's package)")
    folder = Path(tempfile.mkdtemp(prefix="cronsvc-pgbouncer-"))
    folder.chmod(0o755)  # readable by the user it switches to (it refuses to run as root)
    s = connection.settings_dict
    port = free_port()
    ini = folder / "pgbouncer.ini"
    ini.write_text(INI.format(host=s["HOST"] or "127.0.0.1", port=s["PORT"] or 5432, user=s["USER"] or "postgres",
                              listen_port=port, pool_size=pool_size))
    ini.chmod(0o644)
    args = [BINARY, str(ini)]
    if os.geteuid() == 0:
        args[1:1] = ["-u", "nobody"]
    process = Process(args, env=dict(os.environ), log_path=folder / "pgbouncer.log")
    try:
        wait_for(lambda: _accepts(port) or process.popen.poll() is not None, timeout=10,
                 message="pgbouncer to listen")
        if process.popen.poll() is not None:
            raise AssertionError(f"pgbouncer did not start:\n{process.output()[-2000:]}")
        yield PgBouncer(process, port, folder)
    finally:
        process.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _accepts(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False
