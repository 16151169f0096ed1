"""urllib3 plumbing for blocking HTTP outside deliveries (OIDC discovery and token calls,
``cronsvc.oidc``): connections that pass the address guard.

``guarded_pool_manager`` makes a urllib3 PoolManager whose pools build connections through
``guard.open_connection``: every new connection (first hop, redirect hop, reconnect after a
pooled connection died) resolves the host and connects only to an address the policy
allows. Pooled connections keep the address they were checked against, so reuse costs
nothing and DNS cannot swap the address underneath.
"""

from __future__ import annotations

import socket
from typing import Any

from urllib3 import PoolManager
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.exceptions import ConnectTimeoutError, NameResolutionError, NewConnectionError
from urllib3.util.connection import allowed_gai_family

from .guard import AddressPolicy, open_connection


class _GuardedConnectionMixin:
    """Overrides urllib3's socket opening; ``policy`` is bound per pool manager (see below)."""

    policy: AddressPolicy

    def _new_conn(self) -> socket.socket:
        timeout = self.timeout if isinstance(self.timeout, (int, float)) else None
        try:
            sock, _ = open_connection(
                self._dns_host, self.port, self.policy,
                timeout=timeout,
                family=allowed_gai_family(),
                source_address=self.source_address,
                socket_options=self.socket_options,
            )
        except socket.gaierror as exc:
            raise NameResolutionError(self.host, self, exc) from exc
        except UnicodeError as exc:  # an unencodable (IDNA) host name
            raise NameResolutionError(self.host, self, socket.gaierror(str(exc))) from exc
        except TimeoutError as exc:
            raise ConnectTimeoutError(self, f"Connection to {self.host} timed out") from exc
        except OSError as exc:
            raise NewConnectionError(self, f"Failed to establish a new connection: {exc}") from exc
        return sock


class GuardedHTTPConnection(_GuardedConnectionMixin, HTTPConnection):
    pass


class GuardedHTTPSConnection(_GuardedConnectionMixin, HTTPSConnection):
    pass


def _pool_classes(policy: AddressPolicy) -> dict[str, type]:
    # urllib3 builds connections from a class with fixed constructor arguments, so the
    # policy travels as a class attribute of per-adapter subclasses.
    http_conn = type("GuardedHTTPConnection", (GuardedHTTPConnection,), {"policy": policy})
    https_conn = type("GuardedHTTPSConnection", (GuardedHTTPSConnection,), {"policy": policy})
    return {
        "http": type("GuardedHTTPConnectionPool", (HTTPConnectionPool,), {"ConnectionCls": http_conn}),
        "https": type("GuardedHTTPSConnectionPool", (HTTPSConnectionPool,), {"ConnectionCls": https_conn}),
    }


def guarded_pool_manager(policy: AddressPolicy, **kwargs: Any) -> PoolManager:
    """A PoolManager whose every connection passes ``policy`` at socket-open time. It
    has no proxy support on purpose: through a proxy the guard would check the proxy's
    address, not the target's."""
    manager = PoolManager(**kwargs)
    manager.pool_classes_by_scheme = _pool_classes(policy)
    return manager
