"""Outbound address guard: which URLs, ports and IP addresses a delivery may reach.

Customer URLs must never reach loopback, private networks or cloud metadata endpoints.
Checking the URL when a job is saved is only a courtesy: DNS can change between the check
and the request (DNS rebinding), and a redirect can point anywhere. The binding check is
``open_connection``: it resolves the host, filters every candidate address through the
policy and connects only to an allowed one, so the address actually connected to is the
address that was checked. ``transport`` calls it for every new connection, redirects
included.

One policy for every outbound surface: job validation, the workers (both engines), the
notification channels, the script egress proxy and single sign-on all take theirs from
``outbound_policy(settings)``, the only reader of the OUTBOUND_* settings. A second copy
of the rule (an ``AddressPolicy(...)`` built elsewhere) is what once let the surfaces
disagree; tests/foundation/test_one_outbound_policy.py refuses one.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Callable, Iterable, Union
from urllib.parse import SplitResult, urlsplit

import idna

IPAddress = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
IPNetwork = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]

MAX_URL_LENGTH = 2048
ALLOWED_SCHEMES = frozenset({"http", "https"})
DEFAULT_PORTS = {"http": 80, "https": 443}

# Privileged ports other than 80/443 host mail, SSH, LDAP, databases...: an HTTP request
# there is a cross-protocol attack, never a webhook. Unprivileged ports stay open because
# customers really do run endpoints on 8080, 8443, 3000, 5000. Operators narrow or widen
# this with AddressPolicy.allowed_ports.
WELL_KNOWN_WEB_PORTS = frozenset({80, 443})
FIRST_UNPRIVILEGED_PORT = 1024

_FORBIDDEN_RANGES: tuple[tuple[str, IPNetwork], ...] = tuple(
    (reason, ipaddress.ip_network(net))
    for reason, net in (
        ("this-network", "0.0.0.0/8"),
        ("private", "10.0.0.0/8"),
        ("carrier-grade-nat", "100.64.0.0/10"),
        ("loopback", "127.0.0.0/8"),
        ("link-local", "169.254.0.0/16"),  # includes the 169.254.169.254 metadata endpoint
        ("private", "172.16.0.0/12"),
        ("reserved", "192.0.0.0/24"),
        ("documentation", "192.0.2.0/24"),
        ("reserved", "192.88.99.0/24"),
        ("private", "192.168.0.0/16"),
        ("benchmarking", "198.18.0.0/15"),
        ("documentation", "198.51.100.0/24"),
        ("documentation", "203.0.113.0/24"),
        ("multicast", "224.0.0.0/4"),
        ("reserved", "240.0.0.0/4"),  # includes the 255.255.255.255 broadcast
        ("unspecified", "::/128"),
        ("loopback", "::1/128"),
        ("reserved", "::/8"),  # IPv4-compatible and other legacy forms
        ("discard", "100::/64"),
        ("reserved", "2001::/23"),  # IETF protocol assignments, Teredo
        ("documentation", "2001:db8::/32"),
        ("documentation", "3fff::/20"),
        ("private", "fc00::/7"),
        ("link-local", "fe80::/10"),
        ("site-local", "fec0::/10"),
        ("multicast", "ff00::/8"),
    )
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


class ForbiddenTarget(Exception):
    """The URL or the address it leads to may not be reached under the policy."""

    code = "forbidden_target"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class InvalidHost(ForbiddenTarget):
    """The URL's host is not a host name every parser reads the same way: not ASCII, a label
    empty or over 63 characters, a character outside letters, digits, ``-`` and ``_``, an
    ``xn--`` label that is not punycode, or an IPv4 address spelt other than in dotted
    decimal (``127.1``, ``2130706433``; raised only where the address is allowed, else the
    address's own refusal is the reason). Refused everywhere (a 400 ``invalid_host`` at save,
    ``egress_bad_request`` at the script proxy), never guessed at: IDNA 2003 and 2008
    disagree on some names (``faß.de``), and an encoder's error must not reach a user as
    a 500 or kill a proxy thread."""

    code = "invalid_host"


@dataclass(frozen=True)
class AddressPolicy:
    """What deliveries may reach. The default refuses every non-public address.

    ``allowed_networks`` lifts specific ranges (e.g. an intranet the operator trusts);
    ``allow_private`` lifts the address check entirely (single-tenant self-hosting).
    ``allowed_ports`` None means 80, 443 and every port from 1024 up.
    """

    allow_private: bool = False
    allowed_networks: tuple[IPNetwork, ...] = ()
    allowed_ports: frozenset[int] | None = None

    def __post_init__(self) -> None:
        # Normalised so the policy is hashable (lru_cache key) whatever the caller passed.
        networks = tuple(ipaddress.ip_network(n) for n in self.allowed_networks)
        object.__setattr__(self, "allowed_networks", networks)
        if self.allowed_ports is not None:
            object.__setattr__(self, "allowed_ports", frozenset(self.allowed_ports))
        # Hashed once: the policy is a key of the verdict caches, looked up on every delivery
        # (the dataclass's own hash walks every network, in Python, each time).
        object.__setattr__(self, "_hash", hash((self.allow_private, self.allowed_networks, self.allowed_ports)))

    def __hash__(self) -> int:
        return self._hash

    def port_allowed(self, port: int) -> bool:
        if self.allowed_ports is not None:
            return port in self.allowed_ports
        return port in WELL_KNOWN_WEB_PORTS or FIRST_UNPRIVILEGED_PORT <= port <= 65535


def outbound_policy(settings: Any, *, also_allowed_networks: Iterable[str] | str = ()) -> AddressPolicy:
    """THE outbound policy, from an operator's settings (Django's, or any object with these
    attributes): the only place OUTBOUND_ALLOW_PRIVATE, OUTBOUND_ALLOWED_NETWORKS and
    OUTBOUND_ALLOWED_PORTS are read. Every surface (job validation, the workers, channels,
    the script egress proxy, single sign-on) calls it, at call time, so a changed setting
    changes them all alike.

    An empty (or blank) OUTBOUND_ALLOWED_PORTS means the default list (80, 443 and
    1024-65535), never "no port" nor "every port". ``also_allowed_networks`` widens the
    allowed networks for one purpose (SSO_ALLOWED_NETWORKS: identity providers only)."""
    return _outbound_policy(
        bool(settings.OUTBOUND_ALLOW_PRIVATE),
        _networks_text(settings.OUTBOUND_ALLOWED_NETWORKS),
        str(settings.OUTBOUND_ALLOWED_PORTS or ""),
        _networks_text(also_allowed_networks),
    )


def _networks_text(value: Iterable[str] | str) -> str:
    return value if isinstance(value, str) else ",".join(value)


@lru_cache(maxsize=16)
def _outbound_policy(allow_private: bool, networks: str, ports: str, also_networks: str) -> AddressPolicy:
    allowed_ports = None  # AddressPolicy's default: 80, 443 and every port from 1024 up
    if ports.strip():
        allowed_ports = parse_ports(ports)
        if not allowed_ports:
            raise ValueError(f"{ports!r} names no port (leave it empty for the default list)")
    networks = parse_networks(networks) + parse_networks(also_networks)
    return AddressPolicy(allow_private=allow_private, allowed_networks=networks, allowed_ports=allowed_ports)


@lru_cache(maxsize=16)
def parse_ports(text: str) -> frozenset[int]:
    """``"80,443,8000-8999"`` -> the set of ports (for operator settings). Cached: the
    default setting is 64,000 ports, read again for every job saved and every batch sent."""
    ports: set[int] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        low, _, high = item.partition("-")
        first, last = int(low), int(high or low)
        if not 1 <= first <= last <= 65535:
            raise ValueError(f"invalid port range {item!r}")
        ports.update(range(first, last + 1))
    return frozenset(ports)


def parse_networks(text: str) -> tuple[IPNetwork, ...]:
    """``"10.1.0.0/16, fd00::/8"`` -> networks (for operator settings)."""
    return tuple(ipaddress.ip_network(p.strip()) for p in text.split(",") if p.strip())


def _parse_ip(ip: str | IPAddress) -> IPAddress:
    text = str(ip).split("%", 1)[0]  # a zone id does not change which host is reached
    return ipaddress.ip_address(text)


def _reached_address(addr: IPAddress) -> IPAddress:
    """The IPv4 host an IPv6 address actually reaches when it embeds one."""
    if isinstance(addr, ipaddress.IPv6Address):
        if addr.ipv4_mapped is not None:
            return addr.ipv4_mapped
        if addr.sixtofour is not None:
            return addr.sixtofour
        if addr in _NAT64:
            return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    return addr


def _range_reason(addr: IPAddress) -> str | None:
    for reason, network in _FORBIDDEN_RANGES:
        if addr in network:
            return reason
    # Belt and braces: whatever the standard library also considers non-public.
    if addr.is_private or addr.is_reserved or addr.is_loopback or addr.is_link_local:
        return "reserved"
    if addr.is_multicast or addr.is_unspecified:
        return "reserved"
    return None


@lru_cache(maxsize=4096)
def _cached_reason(ip: str, policy: AddressPolicy) -> str | None:
    addr = _parse_ip(ip)
    reached = _reached_address(addr)
    if any(a in net for net in policy.allowed_networks for a in (addr, reached)):
        return None
    return _range_reason(reached)


def forbidden_reason(ip: str | IPAddress, policy: AddressPolicy) -> str | None:
    """Why ``ip`` may not be reached (``"loopback"``, ``"private"``...), or None if it may."""
    if policy.allow_private:
        return None
    return _cached_reason(str(ip), policy)


def is_forbidden_address(ip: str | IPAddress, policy: AddressPolicy) -> bool:
    return forbidden_reason(ip, policy) is not None


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str  # lowercased, without IPv6 brackets
    port: int
    literal_ip: IPAddress | None = field(default=None)


_UNSAFE_URL_CHARS = re.compile(r"[\x00-\x20\x7f\\]")


def check_url(url: str, policy: AddressPolicy) -> Target:
    """Refuse what can be refused from the URL alone: scheme, credentials, port, IP literals.

    Every hop of every delivery passes here, and a job sends to the same URL run after
    run: the verdict of a (URL, policy) pair, which depends on nothing else, is kept. Past
    the checks of the whole string (``_split``), the verdict depends only on the URL's
    scheme and netloc, and is kept per (scheme, netloc, policy) too: a burst of 100,000
    jobs has as many URLs, more than the first cache holds, but far fewer hosts."""
    target, refusal = _url_verdict(url, policy)
    if refusal is not None:
        kind, reason = refusal
        raise kind(reason)
    return target


Verdict = tuple[Target | None, tuple[type[ForbiddenTarget], str] | None]


@lru_cache(maxsize=8192)
def _url_verdict(url: str, policy: AddressPolicy) -> Verdict:
    try:
        parts = _split(url)
    except ForbiddenTarget as exc:
        return None, (type(exc), exc.reason)
    return _origin_verdict(parts.scheme, parts.netloc, policy)


@lru_cache(maxsize=8192)
def _origin_verdict(scheme: str, netloc: str, policy: AddressPolicy) -> Verdict:
    try:
        # urlsplit's hostname and port come from the netloc alone (and the scheme's default)
        return _check_parts(SplitResult(scheme, netloc, "", "", ""), policy), None
    except ForbiddenTarget as exc:
        return None, (type(exc), exc.reason)


def _check_parts(parts: SplitResult, policy: AddressPolicy) -> Target:
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        raise ForbiddenTarget(f"scheme {scheme or '(none)'!r} is not allowed; use http or https")
    if "@" in parts.netloc:
        # user:pass@host is where parsers disagree about the host (http://a@b@c, ...),
        # and credentials belong in the job's auth settings anyway.
        raise ForbiddenTarget("credentials in the URL are not allowed; use the auth setting")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise ForbiddenTarget("the URL has no host")
    port = _port(parts, scheme)
    if not policy.port_allowed(port):
        raise ForbiddenTarget(f"port {port} is not allowed")
    literal = _literal_ip(host)
    if literal is None:
        _check_host_name(host)
    else:
        _refuse_address(host, literal, policy)
        if isinstance(literal, ipaddress.IPv4Address) and host != str(literal):
            # 127.1, 2130706433, 0x7f000001, 0177.0.0.1: getaddrinfo reads them as an address,
            # the asyncio engine's URL parser refuses some and takes others for names. Where
            # the address itself is allowed, only the canonical spelling is.
            raise InvalidHost(f"the host {host!r} is an unusual spelling of {literal}: write {literal}")
    return Target(scheme, host, port, literal)


def check_url_at_save(
    url: str,
    policy: AddressPolicy,
    *,
    resolve: Callable[..., list] | None = None,
) -> Target:
    """``check_url`` plus a DNS look-up, for early feedback when a job is saved.

    Refuses a host whose every address is forbidden. A host that does not resolve yet is
    accepted: the binding check happens again, on the real address, at every connection.
    ``resolve`` (getaddrinfo's signature) replaces the system's look-up, which is
    remembered for a while (``_save_time_addresses``).
    """
    target = check_url(url, policy)
    if target.literal_ip is not None:
        return target
    if resolve is None:
        addresses = _save_time_addresses(target.host, target.port)
    else:
        addresses = _addresses(resolve, target.host, target.port)
    if addresses and all(is_forbidden_address(a, policy) for a in addresses):
        _refuse_address(target.host, _parse_ip(addresses[0]), policy)
    return target


def _addresses(resolve, host, port):
    """The host's addresses; none when it does not resolve (now)."""
    try:
        infos = resolve(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [info[4][0] for info in infos]


SAVE_LOOKUP_SECONDS = 60.0
_SAVE_LOOKUPS_MAX = 4096
_save_lookups: dict[tuple[str, int], tuple[float, list]] = {}


def _save_time_addresses(host, port, *, now=time.monotonic):
    """The system's answer for (host, port), remembered for SAVE_LOOKUP_SECONDS in this
    process, "does not resolve" included. A look-up is a round trip to the resolver on the
    request's path (50-200 ms on a resolver that does not know the name); saving jobs to the
    same host again is the common case. Safe to remember: this check is a courtesy, and
    ``open_connection`` resolves and checks again at every connection (the policy itself is
    applied afresh to the remembered addresses)."""
    key, at = (host, port), now()
    known = _save_lookups.get(key)
    if known is not None and at - known[0] < SAVE_LOOKUP_SECONDS:
        return known[1]
    addresses = _addresses(socket.getaddrinfo, host, port)
    if len(_save_lookups) >= _SAVE_LOOKUPS_MAX:
        _save_lookups.clear()  # bounded; a full table is rare, and starting over is cheap
    _save_lookups[key] = (at, addresses)
    return addresses


def open_connection(
    host: str,
    port: int,
    policy: AddressPolicy,
    *,
    timeout: float | None,
    family: int = socket.AF_UNSPEC,
    source_address: tuple[str, int] | None = None,
    socket_options: list | None = None,
) -> tuple[socket.socket, str]:
    """Resolve, keep only allowed addresses, connect; return the socket and the peer IP.

    Raises ForbiddenTarget when no resolved address is allowed, socket.gaierror when the
    name does not resolve, OSError/TimeoutError when no allowed address accepts.
    """
    if not policy.port_allowed(port):
        raise ForbiddenTarget(f"port {port} is not allowed")
    host = host.strip("[]")
    try:
        candidates = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
    except UnicodeError:  # a name the resolver cannot even encode (check_url refuses it first)
        raise InvalidHost(f"the host {host!r} is not a valid host name") from None
    allowed = [c for c in candidates if not is_forbidden_address(c[4][0], policy)]
    if not allowed:
        _refuse_address(host, _parse_ip(candidates[0][4][0]), policy)
    error: OSError | None = None
    for af, socktype, proto, _, sockaddr in allowed:
        try:
            sock = _connect(af, socktype, proto, sockaddr, timeout,
                            source_address, socket_options)
            return sock, sockaddr[0]
        except OSError as exc:
            error = exc
    assert error is not None
    raise error


def _connect(af, socktype, proto, sockaddr, timeout, source_address, socket_options):
    sock = socket.socket(af, socktype, proto)
    try:
        for option in socket_options or ():
            sock.setsockopt(*option)
        sock.settimeout(timeout)
        if source_address:
            sock.bind(source_address)
        sock.connect(sockaddr)
        return sock
    except BaseException:
        sock.close()
        raise


def _refuse_address(host: str, addr: IPAddress, policy: AddressPolicy) -> None:
    reason = forbidden_reason(addr, policy)
    if reason is not None:
        shown = host if host == str(addr) else f"{host} ({addr})"
        raise ForbiddenTarget(f"{shown} is a {reason} address")


def _split(url: str) -> SplitResult:
    if not isinstance(url, str) or not url:
        raise ForbiddenTarget("the URL is empty")
    if len(url) > MAX_URL_LENGTH:
        raise ForbiddenTarget(f"the URL is longer than {MAX_URL_LENGTH} characters")
    if _UNSAFE_URL_CHARS.search(url):
        raise ForbiddenTarget("the URL contains whitespace, control characters or backslashes")
    try:
        return urlsplit(url)
    except ValueError as exc:
        raise ForbiddenTarget(f"the URL cannot be parsed: {exc}") from exc


def _port(parts: SplitResult, scheme: str) -> int:
    try:
        port = parts.port
    except ValueError as exc:
        raise ForbiddenTarget("the URL has an invalid port") from exc
    return DEFAULT_PORTS[scheme] if port is None else port


_HOST_LABEL = re.compile(r"[a-z0-9_-]{1,63}")
MAX_HOST_LENGTH = 253


def _check_host_name(host: str) -> None:
    """Refuse (InvalidHost) a host name that is not plain ASCII DNS syntax; ``host`` is
    lowercased and has no trailing dot (urlsplit's hostname, stripped)."""
    if not host.isascii():
        raise InvalidHost(f"the host {host!r} is not ASCII; {_idna_hint(host)}")
    if len(host) > MAX_HOST_LENGTH:
        raise InvalidHost(f"the host name is longer than {MAX_HOST_LENGTH} characters")
    for label in host.split("."):
        if not _HOST_LABEL.fullmatch(label):
            raise InvalidHost(f"the host {host!r} is not a host name (labels of 1 to 63 letters, digits, "
                              "'-' or '_', separated by dots)")
        if label.startswith("xn--") and not _is_punycode(label[4:]):
            raise InvalidHost(f"the host {host!r} has an xn-- label that is not valid punycode")


def _is_punycode(text: str) -> bool:
    try:
        return bool(text) and bool(text.encode("ascii").decode("punycode"))
    except UnicodeError:
        return False


def _idna_hint(host: str) -> str:
    try:
        return f"give it in its IDNA (xn--) form, {idna.encode(host, uts46=True).decode('ascii')!r}"
    except (idna.IDNAError, UnicodeError, ValueError):
        return "it is not a valid internationalized domain name either"


def _literal_ip(host: str) -> IPAddress | None:
    """The address a host names literally, including the odd IPv4 spellings.

    getaddrinfo accepts ``2130706433``, ``0x7f.1`` and ``127.1`` as 127.0.0.1, so anything
    inet_aton accepts is treated as the IPv4 address it denotes.
    """
    try:
        return _parse_ip(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None
