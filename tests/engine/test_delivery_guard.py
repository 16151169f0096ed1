"""The outbound address guard: refused addresses, URL checks, save-time and connect-time."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronsvc.delivery.guard import (
    AddressPolicy,
    ForbiddenTarget,
    check_url,
    check_url_at_save,
    forbidden_reason,
    is_forbidden_address,
    open_connection,
    parse_networks,
    parse_ports,
)

DEFAULT = AddressPolicy()
LOOPBACK = AddressPolicy(allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),))


@pytest.mark.parametrize("address, reason", [
    ("127.0.0.1", "loopback"),
    ("127.255.0.9", "loopback"),
    ("::1", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("169.254.169.254", "link-local"),  # cloud metadata
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("100.64.0.1", "carrier-grade-nat"),
    ("0.0.0.0", "this-network"),
    ("0.1.2.3", "this-network"),
    ("::", "unspecified"),
    ("255.255.255.255", "reserved"),
    ("240.0.0.1", "reserved"),
    ("224.0.0.1", "multicast"),
    ("ff02::1", "multicast"),
    ("192.0.2.1", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
    ("::ffff:10.0.0.1", "private"),
    ("::ffff:169.254.169.254", "link-local"),
    ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
    ("2002:a00:1::", "private"),  # 6to4 of 10.0.0.1
    ("::127.0.0.1", "reserved"),  # deprecated IPv4-compatible form
    ("2001::1", "reserved"),  # Teredo
])
def test_forbidden_addresses(address, reason):
    assert forbidden_reason(address, DEFAULT) == reason
    assert is_forbidden_address(address, DEFAULT)
    assert not is_forbidden_address(address, AddressPolicy(allow_private=True))


@pytest.mark.parametrize("address", [
    "8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8",
    "2002:808:808::", "64:ff9b::808:808", "172.32.0.1", "100.128.0.1",
])
def test_public_addresses_are_allowed(address):
    assert forbidden_reason(address, DEFAULT) is None


def test_allowed_networks_lift_only_their_range():
    policy = AddressPolicy(allowed_networks=(ipaddress.ip_network("10.1.0.0/16"),))
    assert not is_forbidden_address("10.1.2.3", policy)
    assert not is_forbidden_address("::ffff:10.1.2.3", policy)
    assert is_forbidden_address("10.2.0.1", policy)
    assert is_forbidden_address("127.0.0.1", policy)


def test_the_policy_accepts_network_strings_and_stays_hashable():
    policy = AddressPolicy(allowed_networks=["127.0.0.0/8"], allowed_ports=[443])
    assert hash(policy) == hash(AddressPolicy(allowed_networks=("127.0.0.0/8",), allowed_ports={443}))
    assert not is_forbidden_address("127.0.0.1", policy)


@given(st.integers(0, 2**24 - 1))
def test_all_of_10_slash_8_is_private_also_when_ipv4_mapped(offset):
    v4 = ipaddress.IPv4Address(int(ipaddress.IPv4Address("10.0.0.0")) + offset)
    assert forbidden_reason(v4, DEFAULT) == "private"
    assert forbidden_reason(f"::ffff:{v4}", DEFAULT) == "private"


@given(st.ip_addresses(v=4))
def test_ipv4_mapped_addresses_are_judged_like_their_ipv4(v4):
    assert forbidden_reason(f"::ffff:{v4}", DEFAULT) == forbidden_reason(v4, DEFAULT)


# --- URLs -------------------------------------------------------------------------------------

@pytest.mark.parametrize("url", [
    "ftp://example.com/", "file:///etc/passwd", "gopher://example.com/", "javascript:alert(1)",
    "//example.com/", "example.com", "",
])
def test_only_http_and_https(url):
    with pytest.raises(ForbiddenTarget):
        check_url(url, DEFAULT)


@pytest.mark.parametrize("url", [
    "http://user:pass@example.com/", "http://example.com@127.0.0.1/", "http://a@b@example.com/",
    "http://example.com\\@127.0.0.1/", "http://exa mple.com/", "http://example.com/\r\nX: y",
    "http://example.com:notaport/", "http:///path",
])
def test_userinfo_tricks_and_malformed_urls_are_refused(url):
    with pytest.raises(ForbiddenTarget):
        check_url(url, DEFAULT)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/", "http://[::1]/", "http://10.0.0.1/", "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:127.0.0.1]/", "http://100.64.0.1/", "http://0.0.0.0/",
    # Spellings getaddrinfo reads as 127.0.0.1:
    "http://2130706433/", "http://0x7f.1/", "http://127.1/", "http://0177.0.0.1/", "http://127.0.0.1./",
])
def test_forbidden_ip_literals_are_refused_from_the_url(url):
    with pytest.raises(ForbiddenTarget):
        check_url(url, DEFAULT)


@pytest.mark.parametrize("port, allowed", [
    (80, True), (443, True), (1024, True), (8080, True), (65535, True),
    (22, False), (25, False), (1023, False), (0, False),
])
def test_default_ports(port, allowed):
    url = f"http://example.com:{port}/"
    if allowed:
        assert check_url(url, DEFAULT).port == port
    else:
        with pytest.raises(ForbiddenTarget, match="port"):
            check_url(url, DEFAULT)


def test_operators_choose_the_ports():
    policy = AddressPolicy(allowed_ports=parse_ports("443, 8000-8999"))
    assert check_url("https://example.com/", policy).port == 443
    assert check_url("http://example.com:8443/", policy).port == 8443
    with pytest.raises(ForbiddenTarget):
        check_url("http://example.com/", policy)  # 80 not listed


def test_check_url_returns_the_target_without_any_dns():
    target = check_url("HTTPS://Example.COM./path?q=1", DEFAULT)
    assert (target.scheme, target.host, target.port, target.literal_ip) == ("https", "example.com", 443, None)
    assert check_url("http://no-such-host.invalid/", DEFAULT).host == "no-such-host.invalid"


def test_save_time_check_resolves_the_host():
    with pytest.raises(ForbiddenTarget, match="localhost"):
        check_url_at_save("http://localhost:8080/", DEFAULT)
    assert check_url_at_save("http://localhost:8080/", LOOPBACK).host == "localhost"


def test_save_time_check_accepts_a_host_that_does_not_resolve_yet():
    assert check_url_at_save("https://no-such-host.invalid/", DEFAULT).port == 443


def test_save_time_check_refuses_only_when_no_address_is_allowed():
    def resolve(host, port, type):  # noqa: A002 - getaddrinfo's keyword
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in ips]

    ips = ["10.0.0.1", "93.184.216.34"]
    assert check_url_at_save("http://mixed.example/", DEFAULT, resolve=resolve)
    ips = ["10.0.0.1", "192.168.0.1"]
    with pytest.raises(ForbiddenTarget, match="private"):
        check_url_at_save("http://private.example/", DEFAULT, resolve=resolve)


# --- connect time -----------------------------------------------------------------------------

@pytest.fixture
def listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


def test_open_connection_refuses_a_name_that_resolves_to_loopback(listener):
    with pytest.raises(ForbiddenTarget, match="loopback"):
        open_connection("localhost", listener, DEFAULT, timeout=1)


def test_open_connection_connects_to_an_allowed_address_and_reports_it(listener):
    sock, address = open_connection("localhost", listener, LOOPBACK, timeout=1)
    try:
        assert address == "127.0.0.1"
        assert sock.getpeername() == ("127.0.0.1", listener)
    finally:
        sock.close()


def test_open_connection_checks_the_port():
    with pytest.raises(ForbiddenTarget, match="port 22"):
        open_connection("127.0.0.1", 22, LOOPBACK, timeout=1)


def test_settings_parsers():
    assert parse_ports("80,443, 8000-8002") == frozenset({80, 443, 8000, 8001, 8002})
    with pytest.raises(ValueError):
        parse_ports("0-10")
    assert parse_networks("10.0.0.0/8, fd00::/8") == (
        ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8"))
