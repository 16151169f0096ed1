"""The delivery engine: ``deliver_async`` sends one prepared delivery on an event loop with
aiohttp and reports what happened (``DeliveryResult``), never raising for network trouble;
``deliver`` does the same for blocking code (a web view, a notification task), on the
process's delivery loop (``loop_thread``) while the caller's thread waits.

A worker process runs thousands of these at once on one loop (one thread), where a
blocking client needs a thread per request in flight; a request then costs the worker less
CPU (bench/README.md, "Figures behind the code"). What every delivery gets:

- The address guard binds at connect time: ``GuardedConnector`` filters the addresses the
  connector resolved (or the IP literal it was given) through the policy, and aiohttp
  connects only to those, so the address connected to is the address checked (no DNS
  rebinding). Every hop's URL also passes ``check_url``; redirects are followed here, by
  hand, with the rules of ``request.redirected``.
- A total deadline per delivery, a connect timeout, a capped body.
- At most ``max_per_host`` requests in flight to one host (``HostQueue``): the others wait
  their turn in order, and a delivery's clock (its total deadline and its duration) starts
  when its turn comes, so time spent in our own queue is never blamed on the host: it
  neither times a run out nor feeds the host's circuit breaker (issue 38: 3,000 runs due at
  once for one slow host opened 3,000 connections and timed out half of them).
- ``Cancellation.cancel()`` from another thread ends the delivery at once: the task is
  cancelled on its loop and its connection closed.
- No environment proxies, no cookie jar, no ~/.netrc (aiohttp's ``trust_env=False``): a
  multi-tenant sender must not send through a proxy the guard does not check, nor hand the
  worker's credentials or one customer's cookies to another's endpoint.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import os
import socket
import ssl
import threading
import time
from functools import lru_cache
from typing import Any, Callable
from urllib.parse import urljoin

import aiohttp
import certifi
import yarl

from .breaker import host_key
from .cancellation import Cancellation
from .deadlines import TickDeadlines
from .guard import AddressPolicy, ForbiddenTarget, _parse_ip, _refuse_address, check_url, is_forbidden_address
from .outcome import CANCELLED, INVALID_RESPONSE, DeliveryResult, storable_text
from .request import REDIRECT_STATUSES, PreparedDelivery, redirected, with_default_headers

DEFAULT_MAX_BODY_BYTES = 16384
_READ_CHUNK = 65536
# The hop being sent, so the connector can note what it connected to.
_hop: contextvars.ContextVar[_AsyncScope | None] = contextvars.ContextVar("cronsvc_async_hop", default=None)


# A busy host's freed connections first (GuardedConnector._reuse_or_open): how much longer a
# request waits for one on a loop running late, per second late, at most REUSE_LAG_WAIT_MAX
# seconds longer; LAG_SMOOTHING weighs each new lateness in the loop's smoothed one.
REUSE_LAG_FACTOR = 4.0
REUSE_LAG_WAIT_MAX = 2.0
LAG_SMOOTHING = 0.2


class GuardedConnector(aiohttp.TCPConnector):
    """A TCPConnector that connects only to addresses ``policy`` allows: the resolved
    addresses (or the URL's IP literal) are filtered before aiohttp connects to them."""

    def __init__(self, policy: AddressPolicy, *, max_opening: int = 16, reuse_wait: float = 0.05,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.policy = policy
        # A request finding none of its host's connections idle while others are in use
        # waits up to ``reuse_wait`` seconds for one of them to come back before it opens
        # another (``_reuse_or_open``): a host answering in milliseconds frees one sooner
        # than a TLS handshake takes, and each handshake costs both sides far more CPU
        # than a request. Without it a busy worker, whose requests hold their connections
        # longer, grew every host's pool to its requests in flight, a handshake each, which
        # slowed it further (bench/README.md, "Figures behind the code"). A slow host still
        # gets more connections, a ``reuse_wait`` later. On a loop running late (its timers fire late: a busy machine,
        # thousands of requests in flight) every request holds its connection longer, so the
        # wait stretches by REUSE_LAG_FACTOR times how late the loop runs (``_lag``, up to
        # REUSE_LAG_WAIT_MAX longer): opening more connections there only makes it later.
        self.reuse_wait = reuse_wait
        self._lag = 0.0  # how late this loop's timers fire, smoothed (seconds)
        self._in_use: dict[Any, set] = {}  # connection key -> its connections lent out
        self._reuse_waiters: dict[Any, collections.deque[asyncio.Future]] = {}
        # Connections being opened at once (TCP and TLS handshakes): a burst of thousands
        # of new TLS connections starves our own loop of CPU until their connect timeouts
        # pass together and the hosts' breakers count our slowness as theirs. A connect's
        # timeout starts once it may open, and a delivery's total deadline stands still
        # while it waits for that. On the realistic mix of bench_delivery.py, 64 at once
        # still left many handshakes past the connect timeout, 16 at once almost none
        # (bench/README.md, "Figures behind the code").
        self._opening = asyncio.Semaphore(max_opening)

    async def _resolve_host(self, host: str, port: int, traces=None):  # noqa: ANN001 - aiohttp's signature
        if not self.policy.port_allowed(port):
            raise ForbiddenTarget(f"port {port} is not allowed")
        candidates = await super()._resolve_host(host, port, traces=traces)
        allowed = [c for c in candidates if not is_forbidden_address(c["host"], self.policy)]
        if not allowed:
            _refuse_address(host, _parse_ip(candidates[0]["host"]), self.policy)
        return allowed

    async def _wrap_create_connection(self, *args: Any, **kwargs: Any):  # noqa: ANN202 - aiohttp's
        scope = _hop.get()
        if self._opening.locked() and scope is not None:
            scope.pause_clock()  # our own queue, not the host's time
            try:
                await self._opening.acquire()
            finally:
                scope.resume_clock()
        else:
            await self._opening.acquire()
        try:
            return await super()._wrap_create_connection(*args, **kwargs)
        finally:
            self._opening.release()

    async def connect(self, req, traces, timeout):  # noqa: ANN001 - aiohttp's signature
        key = req.connection_key
        scope = _hop.get()
        if self.reuse_wait > 0 and not self._conns.get(key) and self._in_use.get(key):
            await self._reuse_or_open(key, scope)
        connection = await super().connect(req, traces, timeout)
        self._in_use.setdefault(key, set()).add(connection.protocol)
        if scope is not None:  # a new or a pooled connection: the request is sent from here on
            scope.request_started = True
            scope.remote_addr = _peer_of(connection.protocol) or scope.remote_addr
        return connection

    async def _reuse_or_open(self, key, scope: _AsyncScope | None) -> None:
        """Wait, at most ``reuse_wait`` seconds (longer on a loop running late), until one of
        ``key``'s connections comes back to the pool, or none is in use any more (then it
        opens one). Our own queue, not the host's time: the delivery's clock stands still
        meanwhile."""
        if scope is not None:
            scope.pause_clock()
        loop = self._loop
        give_up_at = loop.time() + self.reuse_wait + min(REUSE_LAG_WAIT_MAX, REUSE_LAG_FACTOR * self._lag)
        try:
            while not self._conns.get(key) and self._in_use.get(key):
                left = give_up_at - loop.time()
                if left <= 0:
                    return
                turn = loop.create_future()
                self._reuse_waiters.setdefault(key, collections.deque()).append(turn)
                handle = loop.call_at(give_up_at, self._wait_over, turn, give_up_at)
                try:
                    await turn
                finally:
                    handle.cancel()
                    turn.cancel()  # no-op once settled; _release skips (and drops) settled turns
        finally:
            if scope is not None:
                scope.resume_clock()

    def _wait_over(self, turn: asyncio.Future, due: float) -> None:
        """A wait's time is up: how late its timer fired tells how late the loop runs."""
        self._lag += LAG_SMOOTHING * (max(0.0, self._loop.time() - due) - self._lag)
        if not turn.done():
            turn.set_result(None)

    def _release(self, key, protocol, *, should_close: bool = False) -> None:  # noqa: ANN001 - aiohttp's
        super()._release(key, protocol, should_close=should_close)
        lent = self._in_use.get(key)
        if lent is not None:
            lent.discard(protocol)
            if not lent:
                del self._in_use[key]
        waiters = self._reuse_waiters.get(key)
        if waiters is not None:
            while waiters:  # back in the pool, or closed: the first waiter still waiting looks again
                turn = waiters.popleft()
                if not turn.done():
                    turn.set_result(None)
                    break
            if not waiters:
                del self._reuse_waiters[key]



def _peer_of(protocol) -> str | None:
    """The address a connection's protocol is connected to, read once per connection (a
    pooled connection carries many requests)."""
    if protocol is None:
        return None
    peer = getattr(protocol, "_cronsvc_peer", None)
    if peer is None:
        transport = protocol.transport
        address = transport.get_extra_info("peername") if transport is not None else None
        peer = address[0] if address else ""
        protocol._cronsvc_peer = peer
    return peer or None


class StaticResolver(aiohttp.abc.AbstractResolver):
    """Names from a fixed mapping (a hosts file: ``hosts_file``) first, the system's
    resolver for the rest: lets a benchmark give hundreds of loopback aliases names
    without editing /etc/hosts. What it resolves still passes ``GuardedConnector``."""

    def __init__(self, mapping: dict[str, str]) -> None:
        self.mapping = mapping
        self.fallback = aiohttp.DefaultResolver()

    async def resolve(self, host: str, port: int = 0, family: int = socket.AF_INET):  # noqa: ANN201 - aiohttp's
        address = self.mapping.get(host.lower().rstrip("."))
        if address is None:
            return await self.fallback.resolve(host, port, family)
        return [{"hostname": host, "host": address, "port": port, "proto": 0, "flags": socket.AI_NUMERICHOST,
                 "family": socket.AF_INET6 if ":" in address else socket.AF_INET}]

    async def close(self) -> None:
        await self.fallback.close()


def hosts_file(path: str) -> dict[str, str]:
    """name -> address from a file in /etc/hosts' format (the first address of a name wins)."""
    mapping: dict[str, str] = {}
    with open(path) as lines:
        for line in lines:
            address, *names = line.split("#", 1)[0].split() or [""]
            for name in names:
                mapping.setdefault(name.lower().rstrip("."), address)
    return mapping


@lru_cache(maxsize=8192)
def _parsed(url: str) -> yarl.URL | str:
    """``url`` as aiohttp would parse it (``yarl.URL(url)``), once per URL: a job sends to
    the same URL run after run, and yarl keeps only its last 128 parses (a worker sending to
    thousands of URLs in turn parsed every one again). A URL yarl refuses stays a string, for
    aiohttp to refuse as it always did (InvalidURL)."""
    try:
        return yarl.URL(url)
    except ValueError:
        return url


@lru_cache(maxsize=64)
def _hop_timeout(connect_timeout: float) -> aiohttp.ClientTimeout:
    # One per distinct connect timeout, not one per request: the total is asyncio.timeout's.
    return aiohttp.ClientTimeout(total=None, sock_connect=connect_timeout)


class HostQueue:
    """At most ``limit`` requests in flight to one host (``host:port``) on one loop; the
    others wait in arrival order. A request holds its place from before it takes a
    connection until its body is read, so a host never has more than ``limit`` of our
    connections (pooled keep-alive ones included) from this loop. Loop-bound."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._busy: dict[str, int] = {}
        self._waiting: dict[str, collections.deque[asyncio.Future]] = {}

    async def acquire(self, host: str) -> None:
        busy = self._busy.get(host, 0)
        if busy < self.limit and host not in self._waiting:
            self._busy[host] = busy + 1
            return
        turn = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(host, collections.deque()).append(turn)
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release(host)  # handed a place while being cancelled: pass it on
            raise

    def release(self, host: str) -> None:
        waiting = self._waiting.get(host)
        while waiting:
            turn = waiting.popleft()
            if not waiting:
                del self._waiting[host]
            if not turn.done():  # a cancelled waiter's turn is done already: skip it
                turn.set_result(None)  # the place goes to the next waiter as it is
                return
        busy = self._busy[host] - 1
        if busy:
            self._busy[host] = busy
        else:
            del self._busy[host]

    def waiting(self, host: str) -> int:
        return sum(not turn.done() for turn in self._waiting.get(host, ()))

    def in_flight(self, host: str) -> int:
        return self._busy.get(host, 0)


class AsyncSession:
    """One per event loop: pooled keep-alive connections through a ``GuardedConnector``,
    at most ``max_per_host`` of them to one host (``HostQueue``), a busy host's freed ones
    taken before new ones are opened (``reuse_wait``: ``GuardedConnector``). ``resolver``: aiohttp's
    (a ``StaticResolver`` for benchmarks); the guard checks what it resolves. Made on its
    loop's thread (``LoopThread.session``)."""

    def __init__(self, policy: AddressPolicy, *, limit: int = 0, ca_bundle: str | None = None,
                 max_per_host: int = 1000, resolver: aiohttp.abc.AbstractResolver | None = None,
                 reuse_wait: float = 0.05) -> None:
        self.policy = policy
        self.loop = asyncio.get_running_loop()  # made on its loop, used and closed there only
        self._deadlines: TickDeadlines | None = None
        self.hosts = HostQueue(max_per_host)
        # One SSL context for every connection (building one costs milliseconds).
        context = ssl.create_default_context(cafile=ca_bundle or certifi.where())
        self.connector = GuardedConnector(policy, limit=limit, limit_per_host=0, ssl=context, resolver=resolver,
                                          ttl_dns_cache=10, enable_cleanup_closed=True, reuse_wait=reuse_wait)
        self.client = aiohttp.ClientSession(
            connector=self.connector, trust_env=False, cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=True, skip_auto_headers=("User-Agent",),
            timeout=aiohttp.ClientTimeout(total=None),
        )

    async def close(self) -> None:
        await self.client.close()

    def deadlines(self, loop: asyncio.AbstractEventLoop) -> TickDeadlines:
        """The deliveries' total deadlines on this session's loop (one timer a tick)."""
        if self._deadlines is None:
            self._deadlines = TickDeadlines(loop)
        return self._deadlines


class _AsyncScope:
    """What ``Cancellation.bind`` needs (``cancel()`` from any thread), for a task."""

    def __init__(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task) -> None:
        self.loop, self.task = loop, task
        self.cancelled = False
        self.remote_addr: str | None = None
        self.request_started = False
        self.response: Any = None  # once the current hop's headers are in
        self.url: str | None = None
        self.chunks: list[bytes] = []
        self.timed_out = False
        self.started: float | None = None  # when its first turn came (HostQueue)
        self._deadlines: TickDeadlines | None = None
        self._tick: int | None = None
        self._left: float | None = None  # seconds of its deadline left while paused
        self.paused = 0.0  # seconds spent paused (left out of its duration)
        self._paused_at = 0.0

    def start_clock(self, deadlines: TickDeadlines, seconds: float, now: float) -> None:
        """The delivery's turn came: its total deadline runs from now (once: redirect
        hops spend the same budget)."""
        if self.started is None:
            self.started = now
            self._deadlines, self._tick = deadlines, deadlines.add(self, seconds, self.expire)
            self._ends_at = self.loop.time() + seconds

    def pause_clock(self) -> None:
        """While it waits for our own resources (a place to open a connection)."""
        if self._deadlines is not None and self._left is None:
            self._deadlines.withdraw(self, self._tick)
            self._paused_at = self.loop.time()
            self._left = max(0.0, self._ends_at - self._paused_at)

    def resume_clock(self) -> None:
        if self._deadlines is not None and self._left is not None:
            self._tick = self._deadlines.add(self, self._left, self.expire)
            self.paused += self.loop.time() - self._paused_at
            self._ends_at, self._left = self.loop.time() + self._left, None

    def stop_clock(self) -> None:
        if self._deadlines is not None:
            self._deadlines.withdraw(self, self._tick)
            self._deadlines = None

    def cancel(self) -> None:
        self.cancelled = True
        self.loop.call_soon_threadsafe(self.task.cancel)

    def expire(self) -> None:
        """The total deadline passed (TickDeadlines, on the loop's thread)."""
        self.timed_out = True
        self.task.cancel()


async def deliver_async(
    prepared,
    *,
    session: AsyncSession,
    policy: AddressPolicy,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    now_fn: Callable[[], float] = time.monotonic,
    cancellation: Cancellation | None = None,
) -> DeliveryResult:
    """Send ``prepared`` within its total timeout, counted from when its turn for the host
    comes (``HostQueue``); map every failure to an error kind. Run it as a task of the loop
    ``session`` belongs to. ``policy`` must be the one ``session`` was made with: it checks
    each hop's URL here, the session's connector each connection's address."""
    scope = _AsyncScope(asyncio.get_running_loop(), asyncio.current_task())
    try:
        return await _deliver_in(scope, prepared, session, policy, max_body_bytes, now_fn, cancellation)
    finally:
        # The caller's thread keeps the scope (through ``cancellation``) after this: it must
        # not hold the response, whose connection's transport belongs to this loop's thread.
        scope.response, scope.chunks = None, []


async def _deliver_in(scope, prepared, session, policy, max_body_bytes, now_fn, cancellation) -> DeliveryResult:
    if cancellation is not None:
        cancellation.bind(scope)
        if cancellation.cancelled:
            return _failed(CANCELLED, "cancelled while in flight; the connection was closed", scope, now_fn)
    token = _hop.set(scope)
    try:
        return await _send(prepared, session, policy, scope, now_fn, max_body_bytes)
    except asyncio.CancelledError:
        if not (scope.cancelled or scope.timed_out):
            raise  # the loop is stopping, not a customer's cancel nor the deadline
        asyncio.current_task().uncancel()
        if scope.cancelled:
            return _failed(CANCELLED, "cancelled while in flight; the connection was closed", scope, now_fn)
    except Exception as exc:
        return _failed(*_error_kind(exc, scope), scope, now_fn)
    finally:
        scope.stop_clock()
        _hop.reset(token)
    if scope.response is not None:  # the headers came, the body did not in time
        return _result_of(scope.response, scope.url, scope, now_fn, b"".join(scope.chunks),
                          ("timeout", "no complete response within the timeout"), max_body_bytes)
    if not scope.request_started:
        return _failed("connect_error", "timed out while connecting", scope, now_fn)
    return _failed("timeout", "no complete response within the timeout", scope, now_fn)


async def _send(prepared, session, policy, scope, now_fn, max_body_bytes) -> DeliveryResult:
    method, url, body = prepared.method, prepared.url, prepared.body
    headers = with_default_headers(prepared.headers)
    hops_left = prepared.max_redirects if prepared.follow_redirects else 0
    deadlines = session.deadlines(scope.loop)
    while True:
        check_url(url, policy)
        scope.request_started = False
        host = host_key(url)
        await session.hosts.acquire(host)
        try:
            scope.start_clock(deadlines, prepared.timeout, now_fn())
            async with session.client.request(
                method, _parsed(url), headers=headers, data=body or None, allow_redirects=False,
                timeout=_hop_timeout(prepared.connect_timeout),
            ) as response:
                location = response.headers.get("location")
                if hops_left == 0 or response.status not in REDIRECT_STATUSES or not location:
                    return await _result(response, url, scope, now_fn, max_body_bytes)
        finally:
            session.hosts.release(host)
        hops_left -= 1
        next_url = urljoin(url, location)
        method, body, headers = redirected(response.status, method, body, headers, url, next_url)
        url = next_url


async def _result(response, url, scope, now_fn, limit) -> DeliveryResult:
    scope.response, scope.url = response, url
    chunks = scope.chunks
    wanted, error = limit + 1, None
    length = response.content_length
    try:
        if length is not None and length <= limit and not response.headers.get("content-encoding"):
            chunks.append(await response.read())  # the whole body, announced and within the cap
            wanted = 0
        while wanted > 0:
            chunk = await response.content.read(min(wanted, _READ_CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            wanted -= len(chunk)
    except (aiohttp.ClientError, OSError) as exc:
        error = exc
    failure = _error_kind(error, scope) if error is not None else (None, None)
    return _result_of(response, url, scope, now_fn, b"".join(chunks), failure, limit)


def _duration_ms(scope: _AsyncScope, now_fn) -> float:
    """From the delivery's turn until now, less its waits for our own resources."""
    return 0.0 if scope.started is None else max(0.0, now_fn() - scope.started - scope.paused) * 1000.0


def _result_of(response, url, scope, now_fn, data, failure, limit) -> DeliveryResult:
    kind, message = failure
    truncated = kind is None and len(data) > limit
    return DeliveryResult(
        status_code=response.status,
        headers=_merged(response.headers),
        body_excerpt=_decode(data[:limit], response.headers.get("content-type", "")),
        body_truncated=truncated,
        duration_ms=_duration_ms(scope, now_fn),
        remote_addr=scope.remote_addr or _peer(response),
        error_kind=kind,
        error_message=message,
        final_url=url,
    )


def _merged(headers) -> dict[str, str]:
    merged: dict[str, str] = {}
    for name, value in headers.items():
        key, value = storable_text(name.lower()), storable_text(value)
        merged[key] = f"{merged[key]}, {value}" if key in merged else value
    return merged


def _peer(response) -> str | None:
    connection = response.connection
    transport = connection.transport if connection is not None else None
    peer = transport.get_extra_info("peername") if transport is not None else None
    return peer[0] if peer else None


def _failed(kind: str, message: str, scope: _AsyncScope, now_fn) -> DeliveryResult:
    return DeliveryResult(None, {}, "", False, _duration_ms(scope, now_fn), scope.remote_addr, kind, message, None)


def _error_kind(exc: BaseException, scope: _AsyncScope) -> tuple[str, str]:
    if isinstance(exc, ForbiddenTarget):
        return "forbidden_target", exc.reason
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "dns_error", "the host name does not resolve"
    if isinstance(exc, aiohttp.ClientConnectorCertificateError) or isinstance(exc, aiohttp.ClientSSLError):
        return "tls_error", _message(exc)
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return "connect_error", "timed out while connecting"
    if isinstance(exc, aiohttp.ClientConnectorError):
        errno = getattr(exc.os_error, "errno", None)
        reason = os.strerror(errno) if errno else _message(exc)
        return "connect_error", f"Failed to establish a new connection: {reason} ({exc.host}:{exc.port})"
    if isinstance(exc, (aiohttp.ServerTimeoutError, TimeoutError)):
        return "timeout", "no complete response within the timeout"
    if isinstance(exc, aiohttp.InvalidURL):
        return "forbidden_target", f"the URL cannot be used: {_message(exc)}"
    if isinstance(exc, aiohttp.ClientResponseError):
        # aiohttp's parser refused what came back: the request went out and was answered,
        # which a connect_error (nothing sent, not metered) would deny
        return INVALID_RESPONSE, f"the answer is not valid HTTP: {exc.message}"[:500]
    if isinstance(exc, (aiohttp.ClientError, OSError)):
        return "connect_error", _message(exc)
    raise exc  # a bug, not a delivery failure: let it surface


def _message(exc: BaseException) -> str:
    text = str(exc)
    return text[:500] or type(exc).__name__


def _decode(body: bytes, content_type: str) -> str:
    charset = "utf-8"
    for param in content_type.split(";")[1:]:
        key, _, value = param.strip().partition("=")
        if key.lower() == "charset" and value:
            charset = value.strip('"')
    try:
        text = body.decode(charset, errors="replace")
    except LookupError:
        text = body.decode("utf-8", errors="replace")
    return storable_text(text)


def deliver(
    prepared: PreparedDelivery,
    *,
    session: AsyncSession,
    policy: AddressPolicy,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    cancellation: Cancellation | None = None,
) -> DeliveryResult:
    """``deliver_async`` for blocking code: run on ``session``'s loop (another thread's)
    while this thread waits for the result."""
    return asyncio.run_coroutine_threadsafe(deliver_async(
        prepared, session=session, policy=policy, max_body_bytes=max_body_bytes, cancellation=cancellation,
    ), session.loop).result()


EVENT_LOOPS = ("uvloop", "asyncio")


def new_event_loop(kind: str = "uvloop") -> asyncio.AbstractEventLoop:
    """uvloop's loop where it is installed (requirements/base.txt) and asked for, asyncio's
    own otherwise: uvloop's transports and callbacks are C, and a bare aiohttp loop on it costs
    less CPU a request (bench/README.md, "Figures behind the code"). ``asyncio``
    is the way out should uvloop misbehave (a test run once crashed inside uvloop's
    run_forever on the delivery loop's thread, like MagicStack/uvloop#706)."""
    if kind not in EVENT_LOOPS:
        raise ValueError(f"event loop {kind!r}: expected one of {', '.join(EVENT_LOOPS)}")
    if kind == "asyncio":
        return asyncio.new_event_loop()
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class LoopThread:
    """An event loop in a daemon thread of its own, for a blocking caller to hand
    coroutines to (``submit``); one per process (``loop_thread``)."""

    def __init__(self, name: str = "delivery-loop", kind: str = "uvloop") -> None:
        self.loop = new_event_loop(kind)
        self._sessions: dict[Any, AsyncSession] = {}
        self._sessions_lock = threading.Lock()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        self.loop.run_forever()

    def submit(self, coroutine) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the loop's thread and return its result (to build loop-bound objects)."""
        async def run():
            return fn()
        return self.submit(run()).result()

    def session(self, key: Any, make: Callable[[], AsyncSession]) -> AsyncSession:
        """The loop's session for ``key``, made by ``make()`` on the loop's thread the first
        time and kept as long as the loop (from any thread but the loop's own). Never
        dropped before: a session freed on another thread would free its connections'
        uvloop transports there, a crash inside the running loop (like MagicStack/uvloop#706)."""
        with self._sessions_lock:
            if key not in self._sessions:
                self._sessions[key] = self.call(make)
            return self._sessions[key]


_loop_threads: dict[int, LoopThread] = {}
_loop_lock = threading.Lock()


def loop_thread(kind: str = "uvloop") -> LoopThread:
    """This process's delivery loop (a forked child starts its own: threads do not survive a
    fork); ``kind``: its event loop (``new_event_loop``) when it is started."""
    pid = os.getpid()
    with _loop_lock:
        if pid not in _loop_threads:
            _loop_threads.clear()
            _loop_threads[pid] = LoopThread(kind=kind)
        return _loop_threads[pid]


def _forget_after_fork() -> None:
    global _loop_lock
    _loop_threads.clear()
    _loop_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
